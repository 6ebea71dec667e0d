package main

// The --acme mode against Pebble, Let's Encrypt's own ACME test server
// (Debian's pebble package): Pebble validates the tls-alpn-01 challenge on
// serve's listener, its companion pebble-challtestsrv answers DNS with
// 127.0.0.1 for every name, and the strict fake Telegram trusts Pebble's
// root and delivers to the certificate serve obtained.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
)

// envRequirePebble makes the ACME test fail, not skip, without Pebble
// (.ci/run sets it after installing the package).
const envRequirePebble = "TGRELAY_REQUIRE_PEBBLE"

// pebbleBinaries returns the paths of pebble and pebble-challtestsrv, or
// skips (loudly) or fails the test when they are missing.
func pebbleBinaries(t *testing.T) (pebble, challtestsrv string) {
	t.Helper()
	p, err1 := exec.LookPath("pebble")
	c, err2 := exec.LookPath("pebble-challtestsrv")
	if err1 != nil || err2 != nil {
		msg := "Pebble (Debian package pebble: pebble and pebble-challtestsrv) is not installed, so --acme is NOT tested; apt-get install pebble"
		if os.Getenv(envRequirePebble) == "1" {
			t.Fatalf("%s=1 but %s", envRequirePebble, msg)
		}
		t.Skip("SKIPPED: " + msg)
	}
	return p, c
}

// freeUDPAddr returns a loopback UDP port that was free a moment ago.
func freeUDPAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// startProc starts a helper process, stopped (and its output logged when
// the test fails) at cleanup.
func startProc(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), out)
		}
	})
}

// waitHTTP polls url with c until it answers at all.
func waitHTTP(t *testing.T, c *http.Client, url string) {
	t.Helper()
	serveWaitFor(t, url+" to answer", func() bool {
		resp, err := c.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
}

func TestServeHTTPSACMEWithPebble(t *testing.T) {
	t.Parallel()
	pebble, challtestsrv := pebbleBinaries(t)
	const host = "bot.tgrelay.test"
	dir := t.TempDir()

	// Pebble's own HTTPS listener needs a certificate; the ACME client
	// trusts its CA through --acme-ca-file.
	ca := newTLSTestCA(t, "pebble listener CA")
	caFile := filepath.Join(dir, "pebble-listener-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	listenerCert, listenerKey := filepath.Join(dir, "pebble-cert.pem"), filepath.Join(dir, "pebble-key.pem")
	ca.writeLeaf(t, "localhost", listenerCert, listenerKey, net.IPv4(127, 0, 0, 1))

	serveAddr := testkit.FreeAddr(t)
	_, servePort, _ := net.SplitHostPort(serveAddr)
	dnsAddr := freeUDPAddr(t)
	pebbleAddr, pebbleMgmt, unusedHTTP := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, httpPort, _ := net.SplitHostPort(unusedHTTP)
	config := map[string]any{"pebble": map[string]any{
		"listenAddress": pebbleAddr, "managementListenAddress": pebbleMgmt,
		"certificate": listenerCert, "privateKey": listenerKey,
		"httpPort": atoi(t, httpPort), "tlsPort": atoi(t, servePort),
		"ocspResponderURL": "", "externalAccountBindingRequired": false,
		// Short-lived certificates, renewed (envACMERenewBefore) a few
		// seconds after they are issued, so the test sees one renewed.
		"certificateValidityPeriod": 60,
	}}
	b, _ := json.Marshal(config)
	configFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(configFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	startProc(t, nil, challtestsrv, "-dns01", dnsAddr, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-management", testkit.FreeAddr(t))
	startProc(t, []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"},
		pebble, "-config", configFile, "-dnsserver", dnsAddr)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	pc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 5 * time.Second}
	t.Cleanup(pc.CloseIdleConnections)
	waitHTTP(t, pc, "https://"+pebbleAddr+"/dir")

	// Pebble's issuing root (made at its start) is what Telegram trusts
	// here, as it trusts Let's Encrypt's.
	resp, err := pc.Get("https://" + pebbleMgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	rootPEM, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	issuing := x509.NewCertPool()
	if !issuing.AppendCertsFromPEM(rootPEM) {
		t.Fatalf("Pebble's /roots/0 answered %d: %s", resp.StatusCode, rootPEM)
	}

	srv := strictTelegram(t, issuing, serveAddr)
	ep := newBotEndpoint(t, nil)
	r := startServeProc(t, []string{"TGRELAY_TOKEN=" + srv.Token, "TGRELAY_WEBHOOK_SECRET=" + testSecret, envACMERenewBefore + "=57s"},
		"--api-root", srv.URL, "--db", filepath.Join(dir, "relay.db"), "--listen", serveAddr,
		"--public-url", "https://"+host+"/telegram", "--takeover-from", "none", "--forward", ep.url(),
		"--acme", "--acme-directory", "https://"+pebbleAddr+"/dir", "--acme-ca-file", caFile, "--acme-email", "ops@example.com")
	serveWaitFor(t, "the certificate obtained at start", func() bool { return len(r.logLines("serve: ACME certificate ready")) > 0 }, r)
	sendAndWaitForwarded(t, srv, ep, 3, r)

	leaf := servedLeaf(t, serveAddr, host)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: issuing, DNSName: host, Intermediates: intermediates(t, serveAddr, host)}); err != nil {
		t.Fatalf("the certificate served is not Pebble's for %s: %v", host, err)
	}
	// Renewed on its own, and served at once; deliveries go on.
	serveWaitFor(t, "the certificate to be renewed", func() bool {
		return servedLeaf(t, serveAddr, host).SerialNumber.Cmp(leaf.SerialNumber) != 0
	}, r)
	sendAndWaitForwarded(t, srv, ep, 3, r)

	// Kept beside the database, so a restart does not ask the CA again.
	if _, err := os.Stat(filepath.Join(dir, "relay.db-tls", host)); err != nil {
		t.Errorf("the certificate is not kept beside the database: %v", err)
	}
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit after SIGTERM: %v\n%s", err, r.stderr)
	}
}

// intermediates returns the chain serve sends after its leaf.
func intermediates(t *testing.T, addr, name string) *x509.CertPool {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: name, InsecureSkipVerify: true}) // only reading what is served
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := x509.NewCertPool()
	for _, cert := range c.ConnectionState().PeerCertificates[1:] {
		p.AddCert(cert)
	}
	return p
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
