package tlscert_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/internal/tlscert"
)

// writePair writes a self-signed pair for host to dir and returns the
// paths.
func writePair(t *testing.T, dir, host string) (certPath, keyPath string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	// Written aside and renamed, as a renewal tool does.
	for p, b := range map[string][]byte{
		certPath: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPath:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}),
	} {
		if err := os.WriteFile(p+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath
}

func TestFilesReloadWhenChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certPath, keyPath := writePair(t, dir, "a.example.com")
	var mu sync.Mutex
	var errs []error
	f, err := tlscert.LoadFiles(certPath, keyPath, func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	cn := func() string {
		c, err := f.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.Subject.CommonName
	}
	if got := cn(); got != "a.example.com" {
		t.Fatalf("serving %q", got)
	}
	writePair(t, dir, "b.example.com")
	if got := cn(); got != "b.example.com" || f.Reloads() != 1 {
		t.Fatalf("after the files changed: serving %q, %d reloads; want b.example.com, 1", got, f.Reloads())
	}
	// A broken key keeps the previous certificate and is reported once.
	if err := os.WriteFile(keyPath, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, again := cn(), cn(); got != "b.example.com" || again != "b.example.com" {
		t.Fatalf("after a broken key: serving %q", got)
	}
	mu.Lock()
	n := len(errs)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("reported %d errors, want 1: %v", n, errs)
	}
	if err := f.Reload(); err == nil {
		t.Fatal("Reload of a broken key succeeded")
	}
	writePair(t, dir, "c.example.com")
	if err := f.Reload(); err != nil || cn() != "c.example.com" {
		t.Fatalf("Reload: %v, serving %q", err, cn())
	}
}

func TestLoadFilesRefusesAMismatch(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	certA, _ := writePair(t, a, "a.example.com")
	_, keyB := writePair(t, b, "b.example.com")
	if _, err := tlscert.LoadFiles(certA, keyB, nil); err == nil {
		t.Fatal("a certificate with another's key loaded")
	}
}

func TestSelfSignedKeptAndRotated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := testkit.NewClock(time.Now())
	cfg := tlscert.SelfSignedConfig{Dir: dir, Host: "203.0.113.9", NowFunc: clk.Now}
	s, err := tlscert.OpenSelfSigned(cfg)
	if err != nil {
		t.Fatal(err)
	}
	leaf := s.Leaf()
	if err := leaf.VerifyHostname("203.0.113.9"); err != nil {
		t.Fatal(err)
	}
	if got := leaf.NotAfter.Sub(clk.Now()).Round(time.Hour); got != tlscert.DefaultSelfSignedValidity {
		t.Fatalf("validity %v", got)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CertificatePEM())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "203.0.113.9"}); err != nil {
		t.Fatalf("the uploaded PEM does not verify the served certificate: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, tlscert.SelfSignedKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}

	// A restart serves the same certificate.
	again, err := tlscert.OpenSelfSigned(cfg)
	if err != nil || !again.Leaf().Equal(leaf) {
		t.Fatalf("reopened: %v, same certificate %t", err, err == nil && again.Leaf().Equal(leaf))
	}
	// Another host gets a new one.
	other, err := tlscert.OpenSelfSigned(tlscert.SelfSignedConfig{Dir: dir, Host: "bot.example.com", NowFunc: clk.Now})
	if err != nil || other.Leaf().Equal(leaf) || other.Leaf().VerifyHostname("bot.example.com") != nil {
		t.Fatalf("for another host: %v", err)
	}

	s, err = tlscert.OpenSelfSigned(cfg) // back to the IP: a new one again
	if err != nil {
		t.Fatal(err)
	}
	leaf = s.Leaf()
	if rotated, err := s.RotateIfDue(); rotated || err != nil {
		t.Fatalf("RotateIfDue on a fresh certificate: %t %v", rotated, err)
	}
	if want := leaf.NotAfter.Add(-tlscert.DefaultSelfSignedRenewBefore); !s.RenewAt().Equal(want) {
		t.Fatalf("RenewAt %v, want %v", s.RenewAt(), want)
	}
	clk.Advance(s.RenewAt().Sub(clk.Now()) + time.Second)
	rotated, err := s.RotateIfDue()
	if !rotated || err != nil || s.Leaf().Equal(leaf) || !s.Leaf().NotAfter.After(leaf.NotAfter) {
		t.Fatalf("RotateIfDue when due: %t %v", rotated, err)
	}
	c, _ := s.GetCertificate(nil)
	if !c.Leaf.Equal(s.Leaf()) {
		t.Fatal("GetCertificate serves the old certificate")
	}
}

func TestSelfSignedConfigBounds(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]tlscert.SelfSignedConfig{
		"no dir":              {Host: "h"},
		"no host":             {Dir: t.TempDir()},
		"validity too short":  {Dir: t.TempDir(), Host: "h", Validity: time.Second},
		"renew past validity": {Dir: t.TempDir(), Host: "h", Validity: time.Hour, RenewBefore: time.Hour},
	} {
		if _, err := tlscert.OpenSelfSigned(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNewACMERefusesAnIP(t *testing.T) {
	t.Parallel()
	if _, err := tlscert.NewACME(tlscert.ACMEConfig{Host: "203.0.113.9", CacheDir: t.TempDir()}); err == nil {
		t.Fatal("an IP address was accepted")
	}
}
