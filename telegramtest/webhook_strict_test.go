package telegramtest_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// testCA is a certificate authority of a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "telegramtest root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// leaf issues a server certificate for host (a name or an IP address),
// signed by ca, or self-signed when ca is nil.
func leaf(t *testing.T, ca *testCA, host string) (tls.Certificate, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// tlsHook is a webhook target serving cert (plain HTTP when cert is nil),
// answering status.
func tlsHook(t *testing.T, cert *tls.Certificate, status int) string {
	t.Helper()
	h := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	h.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	if cert == nil {
		h.Start()
	} else {
		h.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		h.StartTLS()
	}
	t.Cleanup(h.Close)
	return h.Listener.Addr().String()
}

// dialTo maps every address to the loopback address to.
func dialTo(to string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}
}

func TestStrictWebhookRefusesWhatTelegramRefuses(t *testing.T) {
	t.Parallel()
	cfg := fastWebhook()
	cfg.Webhook.Strict = true
	srv := newServer(t, cfg)
	for url, want := range map[string]string{
		"http://bot.example.com/hook":       "Bad Request: " + telegramtest.ErrMsgNotHTTPS,
		"https://bot.example.com:8080/hook": "Bad Request: " + telegramtest.ErrMsgPort,
		"https://127.0.0.1:40123/hook":      "Bad Request: " + telegramtest.ErrMsgPort,
	} {
		wantError(t, call(t, srv, "setWebhook", map[string]any{"url": url}), 400, want)
	}
	wantError(t, call(t, srv, "setWebhook", map[string]any{"url": "https://bot.example.com/hook", "certificate": "not a file"}),
		400, "Bad Request: "+telegramtest.ErrMsgBadCertificate)
	for _, url := range []string{"https://bot.example.com/hook", "https://bot.example.com:8443/hook", "https://203.0.113.9:88/h", "https://bot.example.com:80/"} {
		wantOK(t, call(t, srv, "setWebhook", map[string]any{"url": url}))
	}
}

func TestStrictWebhookDelivery(t *testing.T) {
	t.Parallel()
	ca, otherCA := newTestCA(t), newTestCA(t)
	const name, ip = "bot.example.com", "203.0.113.9"
	good, _ := leaf(t, ca, name)
	wrongName, _ := leaf(t, ca, "other.example.com")
	unknownRoot, _ := leaf(t, otherCA, name)
	selfIP, selfIPPEM := leaf(t, nil, ip)
	wrongIP, wrongIPPEM := leaf(t, nil, "203.0.113.10")
	closed := func() string { return closedport.Addr(t) }
	for _, tc := range []struct {
		name   string
		url    string
		target string // loopback address the dial goes to
		upload []byte
		want   string // last_error_message; "" means delivered
	}{
		{"trusted root, name matches", "https://" + name + "/hook", tlsHook(t, &good, 200), nil, ""},
		{"name mismatch", "https://" + name + "/hook", tlsHook(t, &wrongName, 200), nil, telegramtest.ErrMsgCertVerify},
		{"unknown root", "https://" + name + ":8443/hook", tlsHook(t, &unknownRoot, 200), nil, telegramtest.ErrMsgCertVerify},
		{"uploaded self-signed for the IP", "https://" + ip + ":8443/hook", tlsHook(t, &selfIP, 200), selfIPPEM, ""},
		{"self-signed not uploaded", "https://" + ip + ":8443/hook", tlsHook(t, &selfIP, 200), nil, telegramtest.ErrMsgCertVerify},
		{"uploaded for another IP", "https://" + ip + ":8443/hook", tlsHook(t, &wrongIP, 200), wrongIPPEM, telegramtest.ErrMsgCertVerify},
		{"plain HTTP on the port", "https://" + name + "/hook", tlsHook(t, nil, 200), nil, telegramtest.ErrMsgWrongVersion},
		{"nothing listens", "https://" + name + "/hook", closed(), nil, telegramtest.ErrMsgConnectionRefused},
		{"503", "https://" + name + "/hook", tlsHook(t, &good, 503), nil, "Wrong response from the webhook: 503 Service Unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := fastWebhook()
			cfg.Webhook.MaxAttempts = 1
			// No case waits for a timeout: a TLS handshake on a loaded
			// machine under -race can outlast fastWebhook's 200 ms.
			cfg.Webhook.Timeout = 10 * time.Second
			cfg.Webhook.Strict, cfg.Webhook.RootCAs, cfg.Webhook.DialContextFunc = true, ca.pool(), dialTo(tc.target)
			f := setup(t, cfg)
			params := map[string]any{"url": tc.url}
			if tc.upload != nil {
				params["certificate"] = botapi.InputFile{Reader: bytes.NewReader(tc.upload)}
			}
			c, err := botapi.New(f.srv.Token, botapi.Config{APIRoot: f.srv.URL, HTTPClient: f.srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Call(t.Context(), "setWebhook", params); err != nil {
				t.Fatal(err)
			}
			if _, err := f.srv.SendText(f.chat, f.user, "hello"); err != nil {
				t.Fatal(err)
			}
			waitIdle(t, f.srv, "the delivery")
			d := f.srv.Deliveries()
			info := decode[struct {
				webhookInfo
				HasCustomCertificate bool `json:"has_custom_certificate"`
			}](t, call(t, f.srv, "getWebhookInfo", nil).Result)
			if info.HasCustomCertificate != (tc.upload != nil) {
				t.Errorf("has_custom_certificate = %t", info.HasCustomCertificate)
			}
			if len(d) != 1 {
				t.Fatalf("deliveries = %+v, want 1", d)
			}
			if tc.want == "" {
				if d[0].Status != 200 || info.LastErrorMessage != "" {
					t.Fatalf("delivery = %+v, last error %q; want delivered", d[0], info.LastErrorMessage)
				}
				return
			}
			if d[0].Err != tc.want || info.LastErrorMessage != tc.want || info.LastErrorDate == 0 {
				t.Fatalf("delivery = %+v, getWebhookInfo %+v; want %q", d[0], info, tc.want)
			}
		})
	}
}

func TestStrictConfigValidate(t *testing.T) {
	t.Parallel()
	for name, w := range map[string]telegramtest.WebhookConfig{
		"Client with Strict":             {Strict: true, Client: http.DefaultClient},
		"RootCAs without Strict":         {RootCAs: x509.NewCertPool()},
		"DialContextFunc without Strict": {DialContextFunc: dialTo("127.0.0.1:1")},
	} {
		if err := (telegramtest.Config{Webhook: w}).Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}
