package main

// End-to-end tests of serve's HTTPS modes: the fake Bot API delivers in its
// strict mode, as Telegram does (https only, to an allowed port, the
// certificate verified for the URL's host against trusted roots or the
// uploaded certificate), to a Telegram-valid public URL whose address a
// dial override maps to serve's loopback listener; each update must reach
// the app.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// tlsTestCA is a certificate authority of a test.
type tlsTestCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTLSTestCA(t *testing.T, name string) *tlsTestCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &tlsTestCA{cert, key}
}

// writeLeaf writes a certificate for host (and ips) signed by ca, and its
// key, to certPath and keyPath, each written aside and renamed into place
// (as a renewal tool does).
func (ca *tlsTestCA) writeLeaf(t *testing.T, host, certPath, keyPath string, ips ...net.IP) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host}, IPAddresses: ips,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	for p, b := range map[string][]byte{
		keyPath:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}),
		certPath: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	} {
		if err := os.WriteFile(p+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
	}
}

// strictTelegram starts a fake Bot API that delivers webhooks as Telegram
// does, trusting roots, with every delivery's connection going to
// listenAddr.
func strictTelegram(t *testing.T, roots *x509.CertPool, listenAddr string) *telegramtest.Server {
	t.Helper()
	srv := telegramtest.NewServer(telegramtest.Config{
		Webhook: telegramtest.WebhookConfig{
			Timeout: 10 * time.Second, Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 1000,
			Strict: true, RootCAs: roots,
			DialContextFunc: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, listenAddr)
			},
		},
		Logf: t.Logf,
	})
	t.Cleanup(srv.Close)
	return srv
}

// servedLeaf returns the certificate serve presents at addr for name.
func servedLeaf(t *testing.T, addr, name string) *x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: name, InsecureSkipVerify: true}) // only reading what is served
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// sendAndWaitForwarded makes a user write n messages and waits until the app
// got every one.
func sendAndWaitForwarded(t *testing.T, srv *telegramtest.Server, ep *botEndpoint, n int, r *serveProc) {
	t.Helper()
	ids := updateIDs(sendChatter(t, srv, 1, n))
	serveWaitFor(t, "the updates to reach the app over HTTPS", func() bool {
		for _, id := range ids {
			if len(ep.hitsOf(id)) == 0 {
				return false
			}
		}
		return true
	}, r)
}

// webhookLastError returns getWebhookInfo's last_error_message.
func webhookLastError(t *testing.T, srv *telegramtest.Server) string {
	t.Helper()
	raw, err := serveBotClient(t, srv).Call(t.Context(), "getWebhookInfo", nil)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		LastErrorMessage string `json:"last_error_message"`
	}
	_ = json.Unmarshal(raw, &in)
	return in.LastErrorMessage
}

func TestServeHTTPSCertificateFiles(t *testing.T) {
	t.Parallel()
	const host = "bot.example.com"
	ca1, ca2 := newTLSTestCA(t, "first CA"), newTLSTestCA(t, "second CA")
	roots := x509.NewCertPool()
	roots.AddCert(ca1.cert)
	roots.AddCert(ca2.cert)
	addr := testkit.FreeAddr(t)
	srv := strictTelegram(t, roots, addr)
	ep := newBotEndpoint(t, nil)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca1.writeLeaf(t, host, certPath, keyPath)
	r := startServeProc(t, []string{"TGRELAY_TOKEN=" + srv.Token, "TGRELAY_WEBHOOK_SECRET=" + testSecret},
		"--api-root", srv.URL, "--db", filepath.Join(dir, "relay.db"), "--listen", addr,
		"--public-url", "https://"+host+"/telegram", "--takeover-from", "none", "--forward", ep.url(),
		"--tls-cert", certPath, "--tls-key", keyPath)
	if !strings.HasPrefix(r.webhook, "https://") {
		t.Errorf("serve logs its webhook as %q, want https://", r.webhook)
	}
	sendAndWaitForwarded(t, srv, ep, 3, r)

	// A renewed certificate is served at the next handshake, without a
	// restart, and deliveries go on.
	ca2.writeLeaf(t, host, certPath, keyPath)
	if got := servedLeaf(t, addr, host).Issuer.CommonName; got != "second CA" {
		t.Fatalf("after the files changed serve presents a certificate by %q, want the second CA's", got)
	}
	sendAndWaitForwarded(t, srv, ep, 3, r)

	// SIGHUP reads them again too (here: the first CA's once more).
	ca1.writeLeaf(t, host, certPath, keyPath)
	if err := r.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	serveWaitFor(t, "the SIGHUP reload", func() bool { return len(r.logLines("serve: SIGHUP: certificate reloaded")) > 0 }, r)
	if got := servedLeaf(t, addr, host).Issuer.CommonName; got != "first CA" {
		t.Fatalf("after SIGHUP serve presents a certificate by %q", got)
	}
	sendAndWaitForwarded(t, srv, ep, 2, r)

	// A certificate for another name fails as Telegram reports it.
	ca1.writeLeaf(t, "other.example.com", certPath, keyPath)
	sendChatter(t, srv, 1, 1)
	serveWaitFor(t, "Telegram's certificate error", func() bool {
		return webhookLastError(t, srv) == telegramtest.ErrMsgCertVerify
	}, r)
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit after SIGTERM: %v\n%s", err, r.stderr)
	}
}

func TestServeHTTPSSelfSignedForAnIP(t *testing.T) {
	t.Parallel()
	const ip = "203.0.113.9" // a documentation address, mapped to loopback by the fake Telegram
	addr := testkit.FreeAddr(t)
	srv := strictTelegram(t, nil, addr) // trusts nothing but the uploaded certificate
	ep := newBotEndpoint(t, nil)
	dir := t.TempDir()
	r := startServeProc(t, []string{"TGRELAY_TOKEN=" + srv.Token, "TGRELAY_WEBHOOK_SECRET=" + testSecret,
		envSelfSignedValidity + "=6s"}, // rotated 2 s before it expires
		"--api-root", srv.URL, "--db", filepath.Join(dir, "relay.db"), "--listen", addr,
		"--public-url", "https://"+ip+":8443/telegram", "--takeover-from", "none", "--forward", ep.url(),
		"--self-signed")
	raw, err := serveBotClient(t, srv).Call(t.Context(), "getWebhookInfo", nil)
	if err != nil || !strings.Contains(string(raw), `"has_custom_certificate":true`) {
		t.Fatalf("getWebhookInfo = %s, %v; want the uploaded certificate", raw, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "relay.db-tls", "self-signed-cert.pem")); err != nil {
		t.Errorf("the certificate is not kept beside the database: %v", err)
	}
	first := servedLeaf(t, addr, "")
	if first.VerifyHostname(ip) != nil {
		t.Fatalf("served certificate is not for %s", ip)
	}
	sendAndWaitForwarded(t, srv, ep, 3, r)

	// Rotated before it expires, uploaded again, and deliveries go on.
	serveWaitFor(t, "the rotated certificate to be uploaded", func() bool {
		return len(r.logLines("serve: rotated certificate uploaded with setWebhook")) > 0
	}, r)
	if servedLeaf(t, addr, "").Equal(first) {
		t.Fatal("the certificate served is still the first one")
	}
	sendAndWaitForwarded(t, srv, ep, 3, r)
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit after SIGTERM: %v\n%s", err, r.stderr)
	}
}

func TestServeHTTPSFlagErrors(t *testing.T) {
	t.Parallel()
	const token = "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	base := []string{"serve", "--token", token, "--secret", testSecret, "--forward", "http://127.0.0.1:1/", "--takeover-from", "none"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"self-signed on a port Telegram skips", []string{"--self-signed", "--public-url", "https://203.0.113.9:8080/h"}, "--public-url is not an address Telegram delivers to: Telegram delivers webhooks only to ports 443, 80, 88 or 8443 (got 8080)"},
		{"acme on plain http", []string{"--acme", "--public-url", "http://bot.example.com/h"}, "--public-url is not an address Telegram delivers to: a webhook address must be an https URL (got http://)"},
		{"files on a port Telegram skips", []string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--public-url", "https://bot.example.com:9443/h"}, "--public-url is not an address Telegram delivers to: Telegram delivers webhooks only to ports 443, 80, 88 or 8443 (got 9443)"},
		{"acme for an IP", []string{"--acme", "--public-url", "https://203.0.113.9/h"}, "--acme needs a DNS name in --public-url"},
		{"acme off 443", []string{"--acme", "--public-url", "https://bot.example.com:8443/h"}, "--acme needs --public-url on port 443 (got 8443)"},
		{"acme directory with a password", []string{"--acme", "--public-url", "https://bot.example.com/h", "--acme-directory", "https://acme:hunter2@ca.example/dir"}, "--acme-directory has a user name or password"},
		{"two modes", []string{"--acme", "--self-signed", "--public-url", "https://bot.example.com/h"}, "--acme and --self-signed are different ways"},
		{"key without cert", []string{"--tls-key", "k.pem"}, "--tls-cert and --tls-key go together"},
		{"self-signed without a public URL", []string{"--self-signed"}, "--self-signed needs --public-url"},
		{"acme flag without acme", []string{"--self-signed", "--public-url", "https://203.0.113.9/h", "--acme-email", "a@example.com"}, "--acme-email applies to --acme only"},
		{"with PostgreSQL, no tls dir", []string{"--self-signed", "--public-url", "https://203.0.113.9/h", "--db", "postgres://u@127.0.0.1:1/db"}, "needs --tls-dir"},
		{"missing files", []string{"--tls-cert", "nope.pem", "--tls-key", "nope-key.pem"}, "--tls-cert/--tls-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, base...), tc.args...)
			args = append(args, "--db", filepath.Join(t.TempDir(), "r.db"))
			if tc.name == "with PostgreSQL, no tls dir" {
				args = args[:len(args)-2] // its own --db
			}
			_, errOut, code := runBin(t, nil, args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want a failure saying %q", code, errOut, tc.want)
			}
			if strings.Contains(errOut, "hunter2") {
				t.Errorf("stderr quotes a URL's password: %q", errOut)
			}
		})
	}
}
