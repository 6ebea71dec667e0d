package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
)

// certRenewWarning is how long before its expiry a certificate is reported
// as expiring (ACME clients renew 30 days ahead, so a valid ACME
// certificate never gets this close).
const certRenewWarning = 14 * 24 * time.Hour

// checkPublicURL checks the webhook address as Telegram reaches it: its
// scheme, port, name, and certificate.
func (d *doctor) checkPublicURL(ctx context.Context) {
	const check = "public-url"
	if d.o.poll {
		d.skip(check, "not used: serve long-polls (--poll)")
		return
	}
	raw := d.hookURL
	if raw == "" {
		raw = d.o.publicURL
	}
	if raw == "" {
		d.skip(check, "no webhook address to check (see webhook)")
		return
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		d.fail(check, "the webhook address is not a URL", "give serve --public-url as https://host/path")
		return
	}
	d.hookURL = raw
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	switch u.Scheme {
	case "https":
	case "http":
		d.fail(check, fmt.Sprintf("the webhook address (host %s) is http://: Telegram posts only over HTTPS", u.Host),
			"use an https:// --public-url and serve HTTPS (serve --tls-cert/--tls-key, --acme or --self-signed), or a TLS proxy in front")
	default:
		d.fail(check, "the webhook address's scheme is "+u.Scheme, "use an https:// --public-url")
		return
	}
	if slices.Contains(d.env.ports, port) {
		d.ok(check, fmt.Sprintf("port %s is one Telegram delivers to", port))
	} else {
		d.fail(check, fmt.Sprintf("port %s: Telegram delivers webhooks only to ports 443, 80, 88 and 8443", port),
			"use one of them in --public-url (443 is usual), and listen on it or forward it to serve's --listen")
	}
	addrs, ok := d.resolve(ctx, check, host)
	if !ok {
		return
	}
	if u.Scheme == "http" {
		// Telegram would not post here; the secret goes over plain HTTP only
		// to this machine.
		d.trusted = allLoopback(addrs)
		return
	}
	d.checkCertificate(ctx, check, host, net.JoinHostPort(addrs[0], port))
}

// resolve resolves host as Telegram would, compares it with the address
// Telegram reports, and returns the addresses.
func (d *doctor) resolve(ctx context.Context, check, host string) ([]string, bool) {
	var addrs []string
	if ip := net.ParseIP(host); ip != nil {
		addrs = []string{ip.String()}
		d.ok(check, "the host is the IP address "+ip.String()+" (its certificate must name it: serve --self-signed makes such a one)")
	} else {
		pctx, cancel := d.probe(ctx)
		var err error
		addrs, err = d.env.lookupHost(pctx, host)
		cancel()
		if err != nil || len(addrs) == 0 {
			d.fail(check, fmt.Sprintf("the host %s does not resolve: %s", host, dialCause(err)),
				"create its public DNS record (A or AAAA) pointing to this server, and wait for it to propagate")
			return nil, false
		}
		d.ok(check, fmt.Sprintf("%s resolves to %s", host, strings.Join(addrs, ", ")))
	}
	if d.info != nil && d.info.IPAddress != "" && !slices.Contains(addrs, d.info.IPAddress) {
		d.warn(check, fmt.Sprintf("Telegram delivers to %s, but %s resolves here to %s", d.info.IPAddress, host, strings.Join(addrs, ", ")),
			"a DNS change Telegram has not seen yet (it re-resolves within minutes), or DNS answering differently inside: make the public record point to this server")
	}
	if !d.env.privateOK {
		var private []string
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip != nil && (ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified()) {
				private = append(private, a)
			}
		}
		if len(private) == len(addrs) {
			d.fail(check, fmt.Sprintf("%s has only private or loopback addresses (%s): Telegram cannot reach them", host, strings.Join(private, ", ")),
				"use a public address, or a name whose public DNS record points to one")
		}
	}
	return addrs, true
}

func allLoopback(addrs []string) bool {
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return len(addrs) > 0
}

// checkCertificate connects to addr with TLS for host and judges the
// certificate as Telegram would.
func (d *doctor) checkCertificate(ctx context.Context, check, host, addr string) {
	pctx, cancel := d.probe(ctx)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(pctx, "tcp", addr)
	if err != nil {
		d.fail(check, fmt.Sprintf("%s does not accept connections (checked from this host): %s", addr, dialCause(err)),
			"start serve with HTTPS on that port (or the proxy in front of it), and open the port in the firewall")
		return
	}
	defer raw.Close()
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // verified below, as Telegram would
	if net.ParseIP(host) == nil {
		cfg.ServerName = host
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(pctx); err != nil {
		var rec tls.RecordHeaderError
		if errors.As(err, &rec) {
			d.fail(check, addr+" answers plain HTTP, not HTTPS",
				"serve HTTPS there (serve --tls-cert/--tls-key, --acme or --self-signed), or put a TLS proxy in front")
			return
		}
		d.fail(check, fmt.Sprintf("the TLS handshake with %s failed: %v", addr, err),
			"serve a certificate for "+host+" over TLS 1.2 or later")
		return
	}
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		d.fail(check, addr+" sent no certificate", "serve a certificate for "+host)
		return
	}
	leaf, now := certs[0], d.env.now()
	custom := d.info != nil && d.info.HasCustomCertificate
	switch {
	case now.After(leaf.NotAfter):
		d.fail(check, fmt.Sprintf("the certificate expired on %s", fmtTime(leaf.NotAfter)),
			"renew it (serve --acme renews on its own; --self-signed rotates its own)")
		return
	case now.Before(leaf.NotBefore):
		d.fail(check, fmt.Sprintf("the certificate is not valid before %s (is this host's clock right?)", fmtTime(leaf.NotBefore)),
			"check the clock (NTP), or wait")
		return
	}
	if err := leaf.VerifyHostname(host); err != nil {
		d.fail(check, fmt.Sprintf("the certificate is for %s, not %s", certNames(leaf), host),
			"get a certificate for "+host+" (serve --acme does), or use a --public-url the certificate names")
		return
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, verr := leaf.Verify(x509.VerifyOptions{Roots: d.env.roots, Intermediates: inter, DNSName: host, CurrentTime: now})
	// Signed by its own key (CheckSignatureFrom would also want a CA flag,
	// which many self-signed server certificates lack).
	selfSigned := bytes.Equal(leaf.RawIssuer, leaf.RawSubject) &&
		leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature) == nil
	switch {
	case verr == nil && custom:
		d.warn(check, "the certificate is trusted, but a certificate was uploaded with setWebhook: Telegram checks against the upload, and refuses this one if it differs",
			"set the webhook again without a certificate: restart serve with --public-url (without --self-signed)")
		return
	case verr == nil:
		d.trusted = true
	case selfSigned && custom:
		d.trusted, d.tlsPin = true, leaf
		d.ok(check, "the certificate is self-signed and a certificate was uploaded with setWebhook, which Telegram checks against (doctor cannot read the upload back to compare)")
	case selfSigned:
		d.fail(check, "the certificate is self-signed and none was uploaded with setWebhook, so Telegram refuses it",
			"use serve --self-signed (it uploads its certificate), or a certificate from a public CA (serve --acme)")
		return
	case len(certs) == 1:
		d.fail(check, fmt.Sprintf("the certificate's issuer (%s) is not trusted, and the server sends no intermediate certificate", leaf.Issuer.CommonName),
			"serve the full chain (fullchain.pem, not cert.pem), or use serve --acme")
		return
	default:
		d.fail(check, fmt.Sprintf("the certificate's issuer (%s) is not a CA Telegram trusts: %v", leaf.Issuer.CommonName, verr),
			"use a certificate from a public CA (serve --acme), or serve --self-signed")
		return
	}
	left := leaf.NotAfter.Sub(now)
	if left < certRenewWarning {
		d.warn(check, fmt.Sprintf("the certificate expires in %d day(s), on %s", int(left.Hours()/24), fmtTime(leaf.NotAfter)),
			"renew it now (serve --acme renews 30 days ahead on its own)")
		return
	}
	if verr == nil {
		d.ok(check, fmt.Sprintf("the certificate is valid for %s, trusted (issued by %s), until %s", host, leaf.Issuer.CommonName, fmtTime(leaf.NotAfter)))
	}
}

// certNames lists the names a certificate is for.
func certNames(c *x509.Certificate) string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 && c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName+" (common name only, which is not enough)")
	}
	if len(names) == 0 {
		return "no name"
	}
	return strings.Join(names, ", ")
}

// checkSecret probes serve's own webhook at the public URL: a wrong secret
// must be refused, and this one taken. The probe's body is empty, which
// serve answers 400 after the secret check, recording nothing.
func (d *doctor) checkSecret(ctx context.Context) {
	const check = "secret"
	switch {
	case d.o.poll:
		d.skip(check, "not used: serve long-polls (--poll)")
		return
	case d.hookURL == "":
		d.skip(check, "no webhook address to probe (see webhook)")
		return
	case d.o.secret == "":
		d.fail(check, "no webhook secret", "set TGRELAY_WEBHOOK_SECRET (1-256 of A-Z a-z 0-9 _ -) in serve's environment file")
		return
	case !d.trusted:
		d.skip(check, "not probed: the secret is sent only over a connection Telegram would trust (see public-url)")
		return
	}
	hc := d.probeClient()
	defer hc.CloseIdleConnections()
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	wrong := "tgrelay-doctor-" + hex.EncodeToString(b)
	status, err := d.postProbe(ctx, hc, wrong)
	if err != nil {
		d.fail(check, "the webhook cannot be posted to: "+err.Error(),
			"start serve, and check what listens on the public URL")
		return
	}
	switch {
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		d.fail(check, fmt.Sprintf("the webhook address answered %d: it is not serve's webhook", status),
			"make the public URL's path equal serve's --path, or fix the route of the proxy in front")
		return
	case status < 300 || status == http.StatusBadRequest:
		d.fail(check, fmt.Sprintf("the webhook answered %d to a wrong secret: anyone who knows the URL can post updates", status),
			"run serve with TGRELAY_WEBHOOK_SECRET set, and let the proxy in front pass the X-Telegram-Bot-Api-Secret-Token header")
		return
	default:
		d.fail(check, fmt.Sprintf("the webhook answered %d to the probe", status),
			"check serve's log and the proxy in front (5xx: serve or its store is not answering)")
		return
	}
	status, err = d.postProbe(ctx, hc, d.o.secret)
	switch {
	case err != nil:
		d.fail(check, "the webhook cannot be posted to: "+err.Error(), "start serve, and check what listens on the public URL")
	case status == http.StatusBadRequest:
		d.ok(check, "serve's webhook refuses a wrong secret and takes this one (the empty probe was answered 400 and not recorded)")
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		d.fail(check, fmt.Sprintf("serve's webhook refuses this secret too (%d): serve runs with another TGRELAY_WEBHOOK_SECRET than this environment's", status),
			"give serve and doctor the same environment file, then restart serve (it sets the webhook with its secret)")
	default:
		d.warn(check, fmt.Sprintf("the webhook answered %d to an empty body after the secret check; tgrelay's webhook answers 400", status),
			"check that the public URL reaches tgrelay serve, not another handler")
	}
}

// probeClient is the client of the secret probe: no proxy (Telegram posts
// directly), trusting what Telegram trusts.
func (d *doctor) probeClient() *http.Client {
	tc := &tls.Config{RootCAs: d.env.roots, MinVersion: tls.VersionTLS12}
	if d.tlsPin != nil {
		pin := d.tlsPin.Raw
		tc = &tls.Config{
			InsecureSkipVerify: true, // replaced by the pin: only the exact certificate Telegram was given
			MinVersion:         tls.VersionTLS12,
			VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
				if len(rawCerts) == 0 || !bytes.Equal(rawCerts[0], pin) {
					return errors.New("the certificate changed since it was checked")
				}
				return nil
			},
		}
	}
	dialer := &net.Dialer{}
	return &http.Client{
		Timeout: d.env.timeout,
		Transport: &http.Transport{
			Proxy:           nil,
			TLSClientConfig: tc,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, port, err := net.SplitHostPort(addr)
				if err != nil || net.ParseIP(host) != nil {
					return dialer.DialContext(ctx, network, addr)
				}
				addrs, err := d.env.lookupHost(ctx, host)
				if err != nil || len(addrs) == 0 {
					return nil, fmt.Errorf("resolve %s: %w", host, err)
				}
				return dialer.DialContext(ctx, network, net.JoinHostPort(addrs[0], port))
			},
		},
		CheckRedirect: botapi.NoRedirects,
	}
}

// postProbe posts an empty body with secret to the webhook and returns the
// status.
func (d *doctor) postProbe(ctx context.Context, hc *http.Client, secret string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.hookURL, http.NoBody)
	if err != nil {
		return 0, errors.New("the webhook address is not a URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(intake.SecretHeader, secret)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, errors.New(dialCause(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}
