package main

// Tests of `tgrelay doctor` check a real deployment on loopback: serve's
// relay (the same relay.Config serve's flags make) behind a real TLS
// listener with test certificates, telegramtest as Telegram, a real SQLite
// file, and faults injected into each part.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// testHost is the public URL's host name in these tests; the injected
// resolver maps it to loopback.
const testHost = "bot.example.test"

// testCA is a certificate authority the tests make certificates with.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// certSpec describes a server certificate to make.
type certSpec struct {
	names      []string
	notBefore  time.Time
	notAfter   time.Time
	selfSigned bool
	// via signs the leaf with an intermediate of the CA that the server
	// does not send.
	viaUnsentIntermediate bool
}

// issue returns a TLS certificate for spec, signed by ca (or by itself).
func (ca *testCA) issue(t *testing.T, spec certSpec) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if spec.notBefore.IsZero() {
		spec.notBefore = time.Now().Add(-time.Hour)
	}
	if spec.notAfter.IsZero() {
		spec.notAfter = time.Now().Add(90 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: spec.names[0]},
		NotBefore: spec.notBefore, NotAfter: spec.notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range spec.names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	parent, signer := ca.cert, ca.key
	switch {
	case spec.selfSigned:
		parent, signer = tmpl, key
	case spec.viaUnsentIntermediate:
		mid := newTestCA(t, "Test Intermediate")
		midTmpl := *mid.cert
		der, err := x509.CreateCertificate(rand.Reader, &midTmpl, ca.cert, &mid.key.PublicKey, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		parent, _ = x509.ParseCertificate(der)
		signer = mid.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// rigConfig describes the deployment a test builds.
type rigConfig struct {
	// cert, when set, makes serve's webhook HTTPS with it.
	cert func(ca *testCA) tls.Certificate
	// scheme overrides the public URL's scheme (default https with a cert,
	// http without).
	scheme string
	// noServe leaves serve stopped (its port refuses), with the store made
	// and no webhook set.
	noServe bool
	// serveSecret is the secret serve runs with (default testSecret).
	serveSecret string
	// gateway starts serve's gateway.
	gateway bool
	// args are more doctor flags.
	args []string
}

// doctorRig is a deployment and the doctor options that describe it.
type doctorRig struct {
	tg    *telegramtest.Server
	ca    *testCA
	relay *relay.Relay
	o     *serveOptions
	env   doctorEnv
	addr  string
	db    string
	now   time.Time
}

func newDoctorRig(t *testing.T, rc rigConfig) *doctorRig {
	t.Helper()
	rig := &doctorRig{ca: newTestCA(t, "Test Root CA"), now: time.Now()}
	rig.tg = telegramtest.NewServer(telegramtest.Config{
		NowFunc: func() time.Time { return rig.now },
		Webhook: telegramtest.WebhookConfig{Timeout: 5 * time.Second, MaxAttempts: 100, Backoff: time.Hour},
		Logf:    func(string, ...any) {},
	})
	t.Cleanup(rig.tg.Close)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	t.Cleanup(app.Close)
	rig.db = filepath.Join(t.TempDir(), "tgrelay.db")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rig.addr = ln.Addr().String()
	_, port, _ := net.SplitHostPort(rig.addr)
	scheme := "http"
	if rc.cert != nil {
		scheme = "https"
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{rc.cert(rig.ca)}})
	}
	if rc.scheme != "" {
		scheme = rc.scheme
	}
	publicURL := scheme + "://" + net.JoinHostPort(testHost, port) + "/telegram"
	if scheme == "http" {
		publicURL = "http://" + rig.addr + "/telegram"
	}
	serveSecret := rc.serveSecret
	if serveSecret == "" {
		serveSecret = testSecret
	}
	common := []string{"--token", rig.tg.Token, "--api-root", rig.tg.URL, "--db", rig.db, "--public-url", publicURL,
		"--forward", app.URL + "/hook", "--listen", rig.addr}
	gatewayAddr := ""
	if rc.gateway {
		gatewayAddr = "127.0.0.1:0"
	}

	// serve: the relay its flags make, on the prepared listener.
	so := parseServeArgs(t, append(common, "--secret", serveSecret, "--takeover-from", "none", "--gateway-listen", gatewayAddr))
	st, err := openStore(t.Context(), rig.db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if rc.noServe {
		_ = ln.Close()
	} else {
		cfg := so.relayConfig()
		cfg.Store, cfg.Listener = st.updateStore, ln
		cfg.Logger = slog.New(slog.DiscardHandler)
		r, err := relay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Stop() })
		rig.relay = r
		if rc.gateway {
			gatewayAddr = r.GatewayAddr().String()
		}
	}

	args := append(common, "--secret", testSecret)
	if gatewayAddr != "" {
		args = append(args, "--gateway-listen", gatewayAddr)
	}
	rig.o = parseServeArgs(t, append(args, rc.args...))
	rig.env = defaultDoctorEnv()
	rig.env.now = func() time.Time { return rig.now }
	rig.env.roots = rig.ca.pool
	rig.env.ports = append([]string{port}, telegramWebhookPorts...)
	rig.env.privateOK = true
	rig.env.getenv = func(string) string { return "" }
	rig.env.lookupHost = func(ctx context.Context, host string) ([]string, error) {
		if host == testHost {
			return []string{"127.0.0.1"}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return rig
}

// parseServeArgs parses args with serve's flags, as doctor does.
func parseServeArgs(t *testing.T, args []string) *serveOptions {
	t.Helper()
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := defineServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func (rig *doctorRig) diagnose(t *testing.T) doctorReport {
	t.Helper()
	rep := diagnose(t.Context(), rig.o, rig.env)
	var b strings.Builder
	_ = writeDoctorReport(&b, rep, false)
	t.Logf("doctor:\n%s", b.String())
	js, _ := json.Marshal(rep)
	for _, secret := range []string{rig.tg.Token, testSecret, strings.SplitN(rig.tg.Token, ":", 2)[1]} {
		if strings.Contains(string(js), secret) || strings.Contains(b.String(), secret) {
			t.Errorf("the report contains a secret")
		}
	}
	return rep
}

// want asserts a finding of check with status whose text contains what and
// whose fix contains fix.
func want(t *testing.T, rep doctorReport, check, status, what, fix string) {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Check == check && f.Status == status && strings.Contains(f.What, what) && strings.Contains(f.Fix, fix) {
			return
		}
	}
	t.Errorf("no %s finding %q with %q (fix %q) among %+v", status, check, what, fix, rep.Findings)
}

func TestDoctorHealthyDeployment(t *testing.T) {
	t.Parallel()
	rig := newDoctorRig(t, rigConfig{
		cert:    func(ca *testCA) tls.Certificate { return ca.issue(t, certSpec{names: []string{testHost}}) },
		gateway: true,
	})
	rep := rig.diagnose(t)
	if rep.Worst != statusOK {
		t.Errorf("worst = %s, want ok", rep.Worst)
	}
	want(t, rep, "token", statusOK, "@telegramtest_bot", "")
	want(t, rep, "webhook", statusOK, "owner tag", "")
	want(t, rep, "webhook", statusOK, "no delivery error", "")
	want(t, rep, "public-url", statusOK, "resolves to 127.0.0.1", "")
	want(t, rep, "public-url", statusOK, "valid for "+testHost+", trusted", "")
	want(t, rep, "secret", statusOK, "refuses a wrong secret and takes this one", "")
	want(t, rep, "app", statusOK, "accepts connections", "")
	want(t, rep, "gateway", statusOK, "answers getMe", "")
	want(t, rep, "store", statusOK, "schema version", "")
	want(t, rep, "store", statusOK, "writable", "")
	// The probes recorded nothing.
	stats, err := rig.relay.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for state, n := range stats.Count {
		if n != 0 {
			t.Errorf("the store holds %d %v updates after doctor, want none", n, state)
		}
	}
}
