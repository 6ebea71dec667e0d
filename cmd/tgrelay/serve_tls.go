package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/internal/tlscert"
	"github.com/tgrelay/tgrelay/relay"
)

// envSelfSignedValidity is a test seam: the validity of the certificates
// --self-signed generates (a Go duration), so a test sees one rotated.
const envSelfSignedValidity = "TGRELAY_TEST_SELF_SIGNED_VALIDITY"

// envACMERenewBefore is a test seam: how long before expiry --acme renews
// a certificate (a Go duration), so a test against a CA issuing
// short-lived certificates sees one renewed.
const envACMERenewBefore = "TGRELAY_TEST_ACME_RENEW_BEFORE"

// reclaimMaxWait caps the wait between attempts to upload a rotated
// certificate.
const reclaimMaxWait = time.Minute

// tlsFlags are serve's HTTPS flags.
type tlsFlags struct {
	certFile, keyFile                string
	acme                             bool
	acmeDirectory, acmeEmail, acmeCA string
	selfSigned                       bool
	dir                              string
	selfSignedValidity               time.Duration // envSelfSignedValidity; 0: the default
	acmeRenewBefore                  time.Duration // envACMERenewBefore; 0: the default
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.certFile, "tls-cert", "", "serve HTTPS with the certificate (and chain) in this PEM `file`, reloaded when it changes or on SIGHUP; with --tls-key")
	fs.StringVar(&t.keyFile, "tls-key", "", "PEM `file` of --tls-cert's private key")
	fs.BoolVar(&t.acme, "acme", false, "serve HTTPS with a certificate from an ACME CA (Let's Encrypt) for --public-url's host, renewed on its own")
	fs.StringVar(&t.acmeDirectory, "acme-directory", tlscert.LetsEncryptURL, "ACME directory `URL` of the CA for --acme")
	fs.StringVar(&t.acmeEmail, "acme-email", "", "contact `address` given to the ACME CA (expiry notices)")
	fs.StringVar(&t.acmeCA, "acme-ca-file", "", "PEM `file` of the roots to trust for the ACME CA's own HTTPS (a test CA's; default the system's)")
	fs.BoolVar(&t.selfSigned, "self-signed", false, "serve HTTPS with a self-signed certificate for --public-url's host or IP address, uploaded with setWebhook and rotated before it expires")
	fs.StringVar(&t.dir, "tls-dir", "", "`directory` where --acme and --self-signed keep certificates and keys (default <db>-tls beside a SQLite --db; required with PostgreSQL)")
}

// mode names the HTTPS mode chosen, "" for none.
func (t *tlsFlags) mode() string {
	var modes []string
	if t.certFile != "" || t.keyFile != "" {
		modes = append(modes, "--tls-cert")
	}
	if t.acme {
		modes = append(modes, "--acme")
	}
	if t.selfSigned {
		modes = append(modes, "--self-signed")
	}
	return strings.Join(modes, " and ")
}

// validate checks the HTTPS flags against the rest, without I/O. Its
// errors name the flag.
func (t *tlsFlags) validate(o *serveOptions, given func(string) bool) error {
	mode := t.mode()
	usage := func(msg string) error { return &usageError{msg: msg, hint: "Run 'tgrelay help serve' for usage."} }
	if strings.Contains(mode, " and ") {
		return usage(mode + " are different ways to serve HTTPS: choose one")
	}
	if !t.acme {
		for _, f := range []string{"acme-directory", "acme-email", "acme-ca-file"} {
			if given(f) {
				return usage("--" + f + " applies to --acme only")
			}
		}
	}
	if !t.acme && !t.selfSigned && t.dir != "" {
		return usage("--tls-dir applies to --acme and --self-signed only")
	}
	if mode == "" {
		return nil
	}
	if (t.certFile == "") != (t.keyFile == "") {
		return usage("--tls-cert and --tls-key go together: give both files")
	}
	if o.poll {
		return usage(mode + " applies to the webhook, not to --poll")
	}
	if o.token == "" {
		return usage(mode + " needs --token: the built-in sandbox delivers over plain HTTP (try HTTPS with 'tgrelay sandbox --strict-webhook')")
	}
	if o.publicURL == "" && mode != "--tls-cert" {
		return usage(mode + " needs --public-url: its host is the one the certificate is for")
	}
	if o.publicURL != "" {
		if err := botapi.CheckWebhookURL(o.publicURL); err != nil {
			return usage("--public-url is not an address Telegram delivers to: " + strings.TrimPrefix(err.Error(), "botapi: "))
		}
	}
	if t.acme {
		u, _ := url.Parse(o.publicURL)
		if botapi.WebhookHostIsIP(u) {
			return usage("--acme needs a DNS name in --public-url, not an IP address (use --self-signed for a server known by its IP)")
		}
		if port, _ := botapi.WebhookPort(u); port != 443 {
			return usage(fmt.Sprintf("--acme needs --public-url on port 443 (got %d): the CA checks the tls-alpn-01 challenge there", port))
		}
		d, err := url.Parse(t.acmeDirectory)
		if err != nil || d.Scheme != "https" || d.Host == "" {
			return usage("--acme-directory must be an https:// URL")
		}
		// The directory is logged as it is given; an ACME CA
		// authenticates by the account key, not by the URL.
		if err := configerr.URLCredential(d, "an ACME CA knows its accounts by their keys"); err != nil {
			return usage("--acme-directory " + err.Error())
		}
	}
	if (t.acme || t.selfSigned) && t.dir == "" && isPostgresURL(o.db) {
		return usage(mode + " needs --tls-dir with a PostgreSQL --db: a directory to keep certificates in")
	}
	return nil
}

// tlsDir is where --acme and --self-signed keep their files.
func (t *tlsFlags) tlsDir(db string) string {
	if t.dir != "" {
		return t.dir
	}
	return db + "-tls"
}

// servedTLS is serve's HTTPS, opened.
type servedTLS struct {
	config *tls.Config
	// certPEM is the certificate to upload with setWebhook; nil for none.
	certPEM func() []byte
	// run keeps the certificate up to date until ctx ends.
	run func(ctx context.Context, r *relay.Relay)
}

// open loads or prepares the certificate of the chosen mode; nil without
// one. It reads and writes files, so it runs after validate.
func (t *tlsFlags) open(o *serveOptions, log *slog.Logger) (*servedTLS, error) {
	host := ""
	if u, err := url.Parse(o.publicURL); err == nil {
		host = u.Hostname()
	}
	switch {
	case t.certFile != "":
		files, err := tlscert.LoadFiles(t.certFile, t.keyFile, func(err error) {
			log.Error("serve: reading the new --tls-cert/--tls-key failed", "err", err)
		})
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		if host != "" {
			if err := files.Leaf().VerifyHostname(host); err != nil {
				return nil, &usageError{msg: fmt.Sprintf("--tls-cert is not for --public-url's host %s: %v", host, err),
					hint: "Telegram refuses a certificate for another name; give the certificate of that host."}
			}
		}
		return &servedTLS{
			config: &tls.Config{GetCertificate: files.GetCertificate, MinVersion: tls.VersionTLS12},
			run:    func(ctx context.Context, _ *relay.Relay) { t.reloadOnSIGHUP(ctx, files, log) },
		}, nil
	case t.selfSigned:
		dir := t.tlsDir(o.db)
		ss, err := tlscert.OpenSelfSigned(tlscert.SelfSignedConfig{Dir: dir, Host: host, Validity: t.selfSignedValidity})
		if err != nil {
			return nil, fmt.Errorf("--self-signed: %w", err)
		}
		log.Info("serve: self-signed certificate ready", "host", host, "dir", dir, "expires", ss.Leaf().NotAfter.UTC(), "renew_at", ss.RenewAt().UTC())
		return &servedTLS{
			config:  &tls.Config{GetCertificate: ss.GetCertificate, MinVersion: tls.VersionTLS12},
			certPEM: ss.CertificatePEM,
			run:     func(ctx context.Context, r *relay.Relay) { rotateSelfSigned(ctx, ss, r, log) },
		}, nil
	case t.acme:
		var roots *x509.CertPool
		if t.acmeCA != "" {
			pem, err := readBounded(t.acmeCA, maxCAFileBytes)
			if err != nil {
				return nil, fmt.Errorf("--acme-ca-file: %w", err)
			}
			roots = x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return nil, &usageError{msg: "--acme-ca-file holds no PEM certificate"}
			}
		}
		dir := t.tlsDir(o.db)
		m, err := tlscert.NewACME(tlscert.ACMEConfig{
			Host: host, CacheDir: dir, DirectoryURL: t.acmeDirectory, Email: t.acmeEmail,
			RootCAs: roots, Proxy: http.ProxyFromEnvironment, RenewBefore: t.acmeRenewBefore,
		})
		if err != nil {
			return nil, fmt.Errorf("--acme: %w", err)
		}
		log.Info("serve: ACME certificate from the CA (or the kept one)", "host", host, "directory", t.acmeDirectory, "dir", dir)
		return &servedTLS{config: tlscert.ACMETLSConfig(m), run: func(context.Context, *relay.Relay) {
			// Obtain it now rather than at Telegram's first delivery, so a CA
			// that cannot be reached is reported at start. Not waited for:
			// autocert bounds it (5 minutes) and stop must not wait on it.
			go func() {
				cert, err := m.GetCertificate(tlscert.ECDSAHello(host))
				if err != nil {
					log.Error("serve: obtaining the ACME certificate failed; trying again at each TLS handshake", "host", host, "err", err)
					return
				}
				attrs := []any{"host", host}
				if cert.Leaf != nil {
					attrs = append(attrs, "expires", cert.Leaf.NotAfter.UTC())
				}
				log.Info("serve: ACME certificate ready", attrs...)
			}()
		}}, nil
	}
	return nil, nil
}

// reloadOnSIGHUP reads the certificate files again on each SIGHUP until
// ctx ends. (Changed files are also read at the next handshake.)
func (t *tlsFlags) reloadOnSIGHUP(ctx context.Context, files *tlscert.Files, log *slog.Logger) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		if err := files.Reload(); err != nil {
			log.Error("serve: SIGHUP: reading --tls-cert/--tls-key failed; still serving the certificate loaded before", "err", err)
			continue
		}
		leaf := files.Leaf()
		log.Info("serve: SIGHUP: certificate reloaded", "subject", leaf.Subject.CommonName, "expires", leaf.NotAfter.UTC())
	}
}

// rotateSelfSigned replaces the self-signed certificate when it is due and
// uploads the new one with setWebhook, until ctx ends. Between the two,
// Telegram's deliveries fail verification and are retried by Telegram;
// no update is lost.
func rotateSelfSigned(ctx context.Context, ss *tlscert.SelfSigned, r *relay.Relay, log *slog.Logger) {
	retry := backoff.Capped{Base: time.Second, Max: reclaimMaxWait}
	pending := false // rotated, not uploaded yet
	failures := 0    // in a row, of the step due
	for {
		wait := time.Until(ss.RenewAt())
		if pending || failures > 0 {
			wait = retry.Delay(failures)
		}
		// Woken hourly at least, in case the wall clock jumped.
		if backoff.Sleep(ctx, min(max(wait, 0), time.Hour)) != nil {
			return
		}
		if !pending {
			rotated, err := ss.RotateIfDue()
			if err != nil {
				failures++
				log.Error("serve: rotating the self-signed certificate failed; still serving the old one", "err", err, "retry_in", retry.Delay(failures))
				continue
			}
			failures = 0
			if !rotated {
				continue
			}
			log.Info("serve: self-signed certificate rotated", "expires", ss.Leaf().NotAfter.UTC())
			pending = true
		}
		if err := r.ReclaimWebhook(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			log.Warn("serve: uploading the rotated certificate with setWebhook failed; trying again", "err", err, "retry_in", retry.Delay(failures))
			continue
		}
		pending, failures = false, 0
		log.Info("serve: rotated certificate uploaded with setWebhook")
	}
}

// testSeamsFromEnv reads the test seams envSelfSignedValidity and
// envACMERenewBefore.
func (t *tlsFlags) testSeamsFromEnv() error {
	for name, d := range map[string]*time.Duration{envSelfSignedValidity: &t.selfSignedValidity, envACMERenewBefore: &t.acmeRenewBefore} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		var err error
		if *d, err = time.ParseDuration(v); err != nil {
			return errors.New(name + " is not a duration")
		}
	}
	return nil
}
