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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/internal/pgtest"
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
	rig := &doctorRig{ca: newTestCA(t, "Test Root CA"), now: time.Now().Truncate(time.Second)}
	// The fake Telegram resolves the test host to loopback, as the doctor's
	// injected resolver does.
	dialer := &net.Dialer{}
	hookClient := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the sandbox's own habit; doctor judges the certificate
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, port, _ := net.SplitHostPort(addr); host == testHost {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}}
	t.Cleanup(hookClient.CloseIdleConnections)
	rig.tg = telegramtest.NewServer(telegramtest.Config{
		NowFunc: func() time.Time { return rig.now },
		Webhook: telegramtest.WebhookConfig{Timeout: 5 * time.Second, MaxAttempts: 100, Backoff: time.Hour, Client: hookClient},
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
		cfg.Store, cfg.Listener = st.store, ln
		cfg.Logger = slog.New(slog.DiscardHandler)
		r, err := relay.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
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
	for _, f := range rep.Findings {
		if strings.ContainsAny(f.What+f.Fix, "\n\r") {
			t.Errorf("finding %+v spans lines", f)
		}
	}
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

// expect is one finding a fault must produce.
type expect struct{ check, status, what, fix string }

func TestDoctorNamesTheFixForEachFault(t *testing.T) {
	t.Parallel()
	trusted := func(ca *testCA) tls.Certificate { return ca.issue(t, certSpec{names: []string{testHost}}) }
	for _, tc := range []struct {
		name   string
		rig    rigConfig
		inject func(t *testing.T, rig *doctorRig)
		want   []expect
		worst  string
		// hidden must appear in no finding.
		hidden string
	}{
		{
			name: "serve down: its port refuses, and Telegram says so",
			rig:  rigConfig{cert: trusted, noServe: true},
			inject: func(t *testing.T, rig *doctorRig) {
				// The webhook was set by serve before it stopped.
				setWebhook(t, rig, rig.o.publicURL, testSecret)
				deliverAndFail(t, rig)
			},
			want: []expect{
				{"webhook", statusFail, `"Connection refused"`, "start serve"},
				{"webhook", statusWarn, "update(s) wait at Telegram", "24 hours"},
				{"public-url", statusFail, "does not accept connections", "start serve with HTTPS"},
				{"secret", statusSkip, "not probed", ""},
			},
			worst: statusFail,
		},
		{
			name: "serve runs with another secret",
			rig:  rigConfig{cert: trusted, serveSecret: "another-secret-of-serve"},
			want: []expect{
				{"webhook", statusFail, "set with another secret", "--takeover-from " + testHost},
				{"secret", statusFail, "refuses this secret too (403)", "same environment file"},
			},
			worst: statusFail,
		},
		{
			name: "the webhook was set with this secret, serve runs with another: Telegram gets 403",
			rig:  rigConfig{cert: trusted, serveSecret: "another-secret-of-serve"},
			inject: func(t *testing.T, rig *doctorRig) {
				setWebhook(t, rig, rig.o.publicURL, testSecret) // as 'tgrelay webhook set' with this environment would
				deliverAndFail(t, rig)
			},
			want: []expect{
				{"webhook", statusOK, "owner tag", ""},
				{"webhook", statusFail, `"Wrong response from the webhook: 403 Forbidden"`, "TGRELAY_WEBHOOK_SECRET"},
				{"secret", statusFail, "refuses this secret too (403)", "same environment file"},
			},
			worst: statusFail,
		},
		{
			name: "long polling without a webhook",
			rig:  rigConfig{cert: trusted, noServe: true, args: []string{"--poll"}},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.publicURL = "" // serve refuses --public-url with --poll (the settings check)
			},
			want:  []expect{{"settings", statusOK, "long polling", ""}, {"webhook", statusOK, "as long polling needs", ""}, {"public-url", statusSkip, "--poll", ""}, {"secret", statusSkip, "--poll", ""}},
			worst: statusOK,
		},
		{
			name: "self-signed certificate not uploaded",
			rig: rigConfig{cert: func(ca *testCA) tls.Certificate {
				return ca.issue(t, certSpec{names: []string{testHost}, selfSigned: true})
			}},
			want: []expect{
				{"public-url", statusFail, "self-signed and none was uploaded", "--self-signed"},
				{"secret", statusSkip, "not probed", ""},
			},
			worst: statusFail,
		},
		{
			name: "certificate for another name",
			rig: rigConfig{cert: func(ca *testCA) tls.Certificate {
				return ca.issue(t, certSpec{names: []string{"other.example.test"}})
			}},
			want:  []expect{{"public-url", statusFail, "is for other.example.test, not " + testHost, "--acme"}},
			worst: statusFail,
		},
		{
			name: "expired certificate",
			rig: rigConfig{cert: func(ca *testCA) tls.Certificate {
				return ca.issue(t, certSpec{names: []string{testHost}, notBefore: time.Now().Add(-90 * 24 * time.Hour), notAfter: time.Now().Add(-time.Hour)})
			}},
			want:  []expect{{"public-url", statusFail, "expired", "renew"}},
			worst: statusFail,
		},
		{
			name: "certificate expiring in days",
			rig: rigConfig{cert: func(ca *testCA) tls.Certificate {
				return ca.issue(t, certSpec{names: []string{testHost}, notAfter: time.Now().Add(5*24*time.Hour + time.Hour)})
			}},
			want: []expect{
				{"public-url", statusWarn, "expires in 5 day(s)", "renew"},
				{"secret", statusOK, "takes this one", ""},
			},
			worst: statusWarn,
		},
		{
			name: "intermediate certificate not sent",
			rig: rigConfig{cert: func(ca *testCA) tls.Certificate {
				return ca.issue(t, certSpec{names: []string{testHost}, viaUnsentIntermediate: true})
			}},
			want:  []expect{{"public-url", statusFail, "no intermediate certificate", "fullchain.pem"}},
			worst: statusFail,
		},
		{
			name:  "plain HTTP behind an https:// public URL",
			rig:   rigConfig{scheme: "https"},
			want:  []expect{{"public-url", statusFail, "answers plain HTTP, not HTTPS", "--tls-cert/--tls-key"}},
			worst: statusFail,
		},
		{
			name: "an http:// public URL",
			rig:  rigConfig{},
			want: []expect{
				{"public-url", statusFail, "is http://", "https://"},
				{"secret", statusOK, "takes this one", ""}, // over loopback only
			},
			worst: statusFail,
		},
		{
			name: "a port Telegram does not deliver to",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.env.ports = telegramWebhookPorts
			},
			want:  []expect{{"public-url", statusFail, "only to ports 443, 80, 88 and 8443", "443 is usual"}},
			worst: statusFail,
		},
		{
			name: "a host that does not resolve",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.env.lookupHost = func(ctx context.Context, host string) ([]string, error) {
					return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
				}
			},
			want: []expect{
				{"public-url", statusFail, "does not resolve: no such host " + testHost, "DNS record"},
				{"secret", statusSkip, "not probed", ""},
			},
			worst: statusFail,
		},
		{
			name: "a host with only private addresses",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.env.privateOK = false
			},
			want:  []expect{{"public-url", statusFail, "only private or loopback addresses (127.0.0.1)", "public address"}},
			worst: statusFail,
		},
		{
			name: "Telegram's recent SSL error",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.tg.SetWebhookError(rig.now.Add(-5*time.Minute), "SSL error {error:0A000086:SSL routines::certificate verify failed}")
			},
			want:  []expect{{"webhook", statusFail, "failed 5m0s ago", "fullchain.pem"}},
			worst: statusFail,
		},
		{
			name: "Telegram's old error with nothing waiting",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.tg.SetWebhookError(rig.now.Add(-3*time.Hour), "Failed to resolve host: Name or service not known")
			},
			want:  []expect{{"webhook", statusOK, "old (3h0m0s ago", ""}},
			worst: statusOK,
		},
		{
			name:  "no webhook set",
			rig:   rigConfig{cert: trusted, noServe: true},
			want:  []expect{{"webhook", statusFail, "no webhook is set", "--takeover-from none"}},
			worst: statusFail,
		},
		{
			name: "the webhook points elsewhere",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				setWebhook(t, rig, "https://elsewhere.example.test/hook", "other-secret")
			},
			want:  []expect{{"webhook", statusFail, "points to host elsewhere.example.test", "--takeover-from elsewhere.example.test"}},
			worst: statusFail,
		},
		{
			name: "allowed_updates and max_connections differ from serve's flags",
			rig:  rigConfig{cert: trusted, args: []string{"--allowed-updates", "message,callback_query", "--max-connections", "10"}},
			want: []expect{
				{"webhook", statusWarn, "--allowed-updates says message,callback_query", "restart serve"},
				{"webhook", statusWarn, "max_connections is 40, but --max-connections says 10", "restart serve"},
			},
			worst: statusWarn,
		},
		{
			name: "long polling with a webhook set",
			rig:  rigConfig{cert: trusted, args: []string{"--poll"}},
			want: []expect{
				{"settings", statusFail, "serve would refuse these settings: --public-url applies to the webhook", "tgrelay help serve"},
				{"webhook", statusFail, "a webhook is set (host " + testHost, "tgrelay webhook delete"},
				{"public-url", statusSkip, "--poll", ""},
			},
			worst: statusFail,
		},
		{
			name: "a revoked token",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.token = "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
			},
			want: []expect{
				{"token", statusFail, "Telegram refuses the token", "@BotFather"},
				{"webhook", statusSkip, "see token", ""},
			},
			worst: statusFail,
		},
		{
			name: "no token",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.token = ""
			},
			want:  []expect{{"token", statusFail, "no bot token", "TGRELAY_TOKEN"}},
			worst: statusFail,
		},
		{
			name: "the proxy refuses",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.net.proxy = "http://" + closedport.Addr(t)
			},
			want: []expect{
				{"proxy", statusFail, "does not accept connections: connection refused", "--proxy none"},
				{"token", statusFail, "never reached Telegram", "proxy"},
			},
			worst: statusFail,
		},
		{
			name: "a SOCKS proxy in the environment",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.apiRoot = "https://api.telegram.example.test"
				rig.env.getenv = func(name string) string {
					if name == "HTTPS_PROXY" {
						return "socks5://127.0.0.1:1080"
					}
					return ""
				}
			},
			want:  []expect{{"proxy", statusFail, "socks5 proxy", "HTTP CONNECT"}},
			worst: statusFail,
		},
		{
			name: "the app is down",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.forwardURL = "http://" + closedport.Addr(t) + "/hook"
			},
			want:  []expect{{"app", statusFail, "--forward (host 127.0.0.1:", "start the bot's app"}},
			worst: statusFail,
		},
		{
			name: "the gateway is not there",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.gatewayListen = closedport.Addr(t)
			},
			want:  []expect{{"gateway", statusFail, "does not answer: connection refused", "start serve"}},
			worst: statusFail,
		},
		{
			name: "no database at --db",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.db = filepath.Join(t.TempDir(), "missing.db")
			},
			want:  []expect{{"store", statusFail, "no database at", "start serve once"}},
			worst: statusFail,
		},
		{
			name: "PostgreSQL does not answer",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.db = "postgres://tgrelay:hunter2-db-password@" + closedport.Addr(t) + "/tgrelay?connect_timeout=5"
			},
			want:   []expect{{"store", statusFail, "PostgreSQL does not answer", "TGRELAY_DB"}},
			worst:  statusFail,
			hidden: "hunter2-db-password",
		},
		{
			name: "an unwritable store",
			rig:  rigConfig{cert: trusted},
			inject: func(t *testing.T, rig *doctorRig) {
				rig.o.db = t.TempDir() // a directory: not writable as a file, even by root
			},
			want:  []expect{{"store", statusFail, "is not writable by this user", "serve's user"}},
			worst: statusFail,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := newDoctorRig(t, tc.rig)
			if tc.inject != nil {
				tc.inject(t, rig)
			}
			rep := rig.diagnose(t)
			if js, _ := json.Marshal(rep); tc.hidden != "" && strings.Contains(string(js), tc.hidden) {
				t.Errorf("a finding shows %q", tc.hidden)
			}
			for _, w := range tc.want {
				want(t, rep, w.check, w.status, w.what, w.fix)
			}
			if rep.Worst != tc.worst {
				t.Errorf("worst = %s, want %s", rep.Worst, tc.worst)
			}
		})
	}
}

// setWebhook sets the webhook as another process would.
func setWebhook(t *testing.T, rig *doctorRig, rawURL, secret string) {
	t.Helper()
	u := rawURL
	if secret == testSecret {
		var err error
		if u, err = hookowner.TaggedURL(rawURL, secret); err != nil {
			t.Fatal(err)
		}
	}
	c, err := botapi.New(rig.tg.Token, botapi.Config{APIRoot: rig.tg.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), "setWebhook", map[string]any{"url": u, "secret_token": secret}); err != nil {
		t.Fatal(err)
	}
}

// deliverAndFail makes a user write to the bot and waits until the
// sandbox's delivery failed.
func deliverAndFail(t *testing.T, rig *doctorRig) {
	t.Helper()
	u := rig.tg.NewUser("Ada")
	chat, err := rig.tg.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rig.tg.SendText(chat, u, "hello"); err != nil {
		t.Fatal(err)
	}
	serveWaitFor(t, "a failed webhook delivery", func() bool {
		for _, d := range rig.tg.Deliveries() {
			if d.Err != "" {
				return true
			}
		}
		return false
	})
}

// TestDoctorCommandLine runs the command as a user would: settings from
// serve's environment variables, --json, and the exit status of the worst
// finding. Not parallel: it sets environment variables.
func TestDoctorCommandLine(t *testing.T) {
	rig := newDoctorRig(t, rigConfig{})
	t.Setenv("TGRELAY_TOKEN", rig.tg.Token)
	t.Setenv("TGRELAY_WEBHOOK_SECRET", testSecret)
	t.Setenv("TGRELAY_DB", rig.db)
	t.Setenv("TGRELAY_PUBLIC_URL", rig.o.publicURL)
	t.Setenv("TGRELAY_FORWARD", rig.o.forwardURL)
	t.Setenv("TGRELAY_JSON", "no") // doctor's own flag is not read from the environment
	code, stdout, stderr := runCapture(t, "doctor", "--json", "--api-root", rig.tg.URL)
	// The public URL is http:// on a loopback port: Telegram would not
	// deliver there.
	if code != exitDoctorFail {
		t.Errorf("exit code = %d, want %d (stderr %q)", code, exitDoctorFail, stderr)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, stdout)
	}
	want(t, rep, "token", statusOK, "@telegramtest_bot", "")
	want(t, rep, "webhook", statusOK, "owner tag", "")
	want(t, rep, "public-url", statusFail, "is http://", "https://")
	want(t, rep, "store", statusOK, "schema version", "")
	if rep.Worst != statusFail || !strings.Contains(rep.Version, "tgrelay ") {
		t.Errorf("worst %q, version %q", rep.Worst, rep.Version)
	}
	if !strings.Contains(stderr, "tgrelay doctor: ") || strings.Contains(stdout+stderr, testSecret) || strings.Contains(stdout+stderr, rig.tg.Token) {
		t.Errorf("stderr %q, or a secret in the output", stderr)
	}

	// Human output: one line per finding, status first.
	code, stdout, _ = runCapture(t, "doctor", "--api-root", rig.tg.URL)
	if code != exitDoctorFail {
		t.Errorf("exit code = %d, want %d", code, exitDoctorFail)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != len(rep.Findings)+1 || !strings.HasPrefix(lines[0], "tgrelay ") {
		t.Fatalf("got %d lines for %d findings:\n%s", len(lines), len(rep.Findings), stdout)
	}
	for i, f := range rep.Findings {
		line := lines[i+1]
		if !strings.HasPrefix(line, f.Status+" ") || !strings.Contains(line, f.Check) || (f.Fix != "" && !strings.Contains(line, " -> "+f.Fix)) {
			t.Errorf("line %q does not show finding %+v", line, f)
		}
	}
}

func TestDoctorExitFollowsTheWorstFinding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		statuses []string
		code     int
	}{
		{[]string{statusOK, statusSkip}, exitOK},
		{[]string{statusOK, statusWarn, statusSkip}, exitDoctorWarn},
		{[]string{statusWarn, statusFail, statusOK}, exitDoctorFail},
	} {
		var fs []finding
		e := &doctorExit{}
		for _, s := range tc.statuses {
			fs = append(fs, finding{Status: s})
			e.warns += map[string]int{statusWarn: 1}[s]
			e.fails += map[string]int{statusFail: 1}[s]
		}
		code := exitOK
		if e.warns+e.fails > 0 {
			code = report("doctor", e, io.Discard)
		}
		if code != tc.code || (code == exitOK) != (worst(fs) == statusOK) {
			t.Errorf("%v: exit %d (worst %s), want %d", tc.statuses, code, worst(fs), tc.code)
		}
	}
}

func TestExplainHookError(t *testing.T) {
	t.Parallel()
	// Telegram's own wordings, as its getWebhookInfo reports them.
	for _, tc := range []struct{ msg, plain, fix string }{
		{"Connection refused", "nothing listens", "start serve"},
		{"Connection timed out", "firewall drops", "149.154.160.0/20"},
		{"Read timeout expired", "no answer came in time", "store"},
		{"SSL error {error:0A000086:SSL routines::certificate verify failed}", "does not trust the certificate", "fullchain.pem"},
		{"SSL error {error:14090086:SSL routines:ssl3_get_server_certificate:certificate verify failed}", "does not trust", "--self-signed"},
		{"SSL error {error:0A00010B:SSL routines::wrong version number}", "plain HTTP", "--tls-cert/--tls-key"},
		{"SSL error {error:0A000410:SSL routines::sslv3 alert handshake failure}", "handshake", "certificate"},
		{"Wrong response from the webhook: 401 Unauthorized", "401", "secret"},
		{"Wrong response from the webhook: 403 Forbidden", "403", "TGRELAY_WEBHOOK_SECRET"},
		{"Wrong response from the webhook: 404 Not Found", "404", "--path"},
		{"Wrong response from the webhook: 405 Method Not Allowed", "405", "--path"},
		{"Wrong response from the webhook: 413 Request Entity Too Large", "413", "body limit"},
		{"Wrong response from the webhook: 502 Bad Gateway", "502", "--listen"},
		{"Wrong response from the webhook: 503 Service Unavailable", "503", "store"},
		{"Wrong response from the webhook: 504 Gateway Time-out", "504", "--listen"},
		{"Wrong response from the webhook: 500 Internal Server Error", "other than 2xx", "503"},
		{"Failed to resolve host: Name or service not known", "cannot resolve", "DNS record"},
		{"Failed to resolve host: No address associated with hostname", "cannot resolve", "DNS record"},
		{"Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443", "only to ports", "443"},
		{"Bad Request: bad webhook: IP address 192.168.1.2 is reserved", "private or reserved", "public address"},
		{"Connection reset by peer", "reset", "proxy"},
		{"Bad Request: bad webhook: An HTTPS URL must be provided for webhook", "only over HTTPS", "--acme"},
		{"Something new", "could not deliver", `"Something new"`},
	} {
		plain, fix := explainHookError(tc.msg)
		if !strings.Contains(plain, tc.plain) || !strings.Contains(fix, tc.fix) {
			t.Errorf("%q: got %q -> %q; want %q -> %q", tc.msg, plain, fix, tc.plain, tc.fix)
		}
	}
}

// TestDoctorPostgresStore checks a PostgreSQL --db before serve made its
// table, and after.
func TestDoctorPostgresStore(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	check := func() doctorReport {
		t.Helper()
		o := parseServeArgs(t, []string{"--db", db})
		d := &doctor{o: o, env: defaultDoctorEnv(), red: &botapi.Redactor{}}
		d.checkStore(t.Context())
		t.Logf("%+v", d.out)
		return doctorReport{Findings: d.out, Worst: worst(d.out)}
	}
	want(t, check(), "store", statusFail, "no update table yet", "start serve once")

	st, err := openStore(t.Context(), db, "", false) // as serve does on start
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	rep := check()
	want(t, rep, "store", statusOK, "PostgreSQL: schema version", "")
	want(t, rep, "store", statusOK, "PostgreSQL accepts writes", "")
	want(t, rep, "store", statusOK, "the database's", "")
	if rep.Worst != statusOK {
		t.Errorf("worst = %s", rep.Worst)
	}
}

// TestDoctorPostgresChatIndex checks, with --chat-order strict, that the
// chat index is built or that serve's role may build it: the owner may; a
// role that may only write fails, with the statement for the owner, until
// the owner ran it.
func TestDoctorPostgresChatIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.URL(t)
	st, err := openStore(ctx, db, "", false) // as serve does on start
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	check := func(db string) doctorReport {
		t.Helper()
		o := parseServeArgs(t, []string{"--db", db, "--chat-order", "strict"})
		d := &doctor{o: o, env: defaultDoctorEnv(), red: &botapi.Redactor{}}
		d.checkStore(ctx)
		t.Logf("%+v", d.out)
		return doctorReport{Findings: d.out, Worst: worst(d.out)}
	}
	want(t, check(db), "store", statusOK, "the first strict call builds the chat index", "")

	owner, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	writer := pgtest.WriterURL(t, db)
	want(t, check(writer), "store", statusFail, "this role may not build it", `CREATE INDEX IF NOT EXISTS telegram_updates_chat ON telegram_updates`)

	stmt, err := pgstore.ChatIndexSQL(pgstore.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, stmt); err != nil {
		t.Fatal(err)
	}
	want(t, check(writer), "store", statusOK, "the chat index is built", "")
}

// TestDoctorSelfSignedUploaded runs the checks step by step against serve
// with a self-signed certificate, with getWebhookInfo's
// has_custom_certificate set as Telegram sets it after an upload (the
// sandbox does not report uploads): the certificate is accepted, and the
// secret probe trusts exactly that certificate.
func TestDoctorSelfSignedUploaded(t *testing.T) {
	t.Parallel()
	rig := newDoctorRig(t, rigConfig{cert: func(ca *testCA) tls.Certificate {
		return ca.issue(t, certSpec{names: []string{testHost}, selfSigned: true})
	}})
	d := &doctor{o: rig.o, env: rig.env, red: &botapi.Redactor{}}
	ctx := t.Context()
	d.checkToken(ctx)
	d.checkWebhook(ctx)
	if d.info == nil {
		t.Fatalf("no webhook info: %+v", d.out)
	}
	d.info.HasCustomCertificate = true
	d.checkPublicURL(ctx)
	d.checkSecret(ctx)
	rep := doctorReport{Findings: d.out, Worst: worst(d.out)}
	t.Logf("%+v", d.out)
	want(t, rep, "public-url", statusOK, "self-signed and a certificate was uploaded", "")
	want(t, rep, "secret", statusOK, "takes this one", "")
	if rep.Worst != statusOK {
		t.Errorf("worst = %s", rep.Worst)
	}
}

// TestDoctorComparesTelegramsIPAddress checks the name against the address
// getWebhookInfo reports.
func TestDoctorComparesTelegramsIPAddress(t *testing.T) {
	t.Parallel()
	env := defaultDoctorEnv()
	env.lookupHost = func(context.Context, string) ([]string, error) { return []string{"198.51.100.7"}, nil }
	for _, tc := range []struct {
		telegram, status string
	}{{"198.51.100.7", statusOK}, {"203.0.113.9", statusWarn}, {"", statusOK}} {
		d := &doctor{o: &serveOptions{}, env: env, red: &botapi.Redactor{}, info: &webhookInfo{IPAddress: tc.telegram}}
		if _, ok := d.resolve(t.Context(), "public-url", testHost); !ok {
			t.Fatal("resolve failed")
		}
		rep := doctorReport{Findings: d.out}
		if w := worst(d.out); w != tc.status {
			t.Errorf("Telegram's %q: worst %s, want %s: %+v", tc.telegram, w, tc.status, d.out)
		}
		if tc.status == statusWarn {
			want(t, rep, "public-url", statusWarn, "Telegram delivers to 203.0.113.9, but "+testHost+" resolves here to 198.51.100.7", "DNS")
		}
	}
}

func TestJudgeClockSkew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		skew, bound  time.Duration
		status, what string
	}{
		{0, 0, statusOK, "agrees with the database's within a millisecond"},
		{500 * time.Millisecond, 0, statusOK, "500ms ahead of the database's (±1ms), within --max-clock-skew 2s"},
		{-1500 * time.Millisecond, 0, statusWarn, "1.5s behind the database's"},
		{3 * time.Second, 0, statusFail, "beyond --max-clock-skew 2s"},
		{3 * time.Second, 5 * time.Second, statusWarn, "more than half of --max-clock-skew 5s"},
		{time.Hour, -1, statusOK, "--max-clock-skew is off"},
	} {
		status, what, fix := judgeClockSkew(tc.skew, time.Millisecond, tc.bound)
		if status != tc.status || !strings.Contains(what, tc.what) || (status != statusOK) != (fix != "") {
			t.Errorf("skew %v bound %v: %s %q -> %q; want %s %q", tc.skew, tc.bound, status, what, fix, tc.status, tc.what)
		}
	}
}
