package tlscert

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Defaults and bounds of [SelfSignedConfig].
const (
	// DefaultSelfSignedValidity is how long a generated certificate is
	// valid: a year.
	DefaultSelfSignedValidity = 365 * 24 * time.Hour
	// DefaultSelfSignedRenewBefore is how long before it expires a
	// certificate is replaced: 30 days (or a third of a shorter validity).
	DefaultSelfSignedRenewBefore = 30 * 24 * time.Hour
	// MinSelfSignedValidity is the shortest validity accepted.
	MinSelfSignedValidity = 3 * time.Second
	// selfSignedKeyBits is the RSA key size, the one Telegram's own guide
	// to self-signed certificates uses.
	selfSignedKeyBits = 2048
)

// Names of the files a [SelfSigned] keeps in its directory.
const (
	SelfSignedCertFile = "self-signed-cert.pem"
	SelfSignedKeyFile  = "self-signed-key.pem"
)

// SelfSignedConfig configures [OpenSelfSigned].
type SelfSignedConfig struct {
	// Dir is the directory the certificate and its key are kept in
	// (created, mode 0700). Required.
	Dir string
	// Host is the host name or IP address the certificate is for: its
	// common name, and its only subject alternative name. Required.
	Host string
	// Validity is how long a generated certificate is valid. Defaults to
	// DefaultSelfSignedValidity; at least MinSelfSignedValidity.
	Validity time.Duration
	// RenewBefore is how long before expiry [SelfSigned.RotateIfDue]
	// replaces it. Defaults to DefaultSelfSignedRenewBefore, or a third of
	// Validity when that is shorter; it must be below Validity.
	RenewBefore time.Duration
	// NowFunc is the clock. Nil means time.Now.
	NowFunc func() time.Time
}

// SelfSigned serves a self-signed certificate for one host, generated on
// first use and kept in a directory so a restart serves (and uploads) the
// same one, and replaced by [SelfSigned.RotateIfDue] once it is within
// RenewBefore of its expiry or no longer for the configured host. A
// SelfSigned is safe for concurrent use.
type SelfSigned struct {
	cfg SelfSignedConfig

	mu      sync.Mutex
	cert    *tls.Certificate
	certPEM []byte
}

// OpenSelfSigned loads the certificate kept in cfg.Dir, or generates and
// keeps a new one when there is none, when it is for another host, or when
// it is due for rotation.
func OpenSelfSigned(cfg SelfSignedConfig) (*SelfSigned, error) {
	if cfg.Dir == "" || cfg.Host == "" {
		return nil, errors.New("tlscert: SelfSignedConfig needs Dir and Host")
	}
	if cfg.Validity == 0 {
		cfg.Validity = DefaultSelfSignedValidity
	}
	if cfg.Validity < MinSelfSignedValidity {
		return nil, fmt.Errorf("tlscert: SelfSignedConfig.Validity is %v: want at least %v", cfg.Validity, MinSelfSignedValidity)
	}
	if cfg.RenewBefore == 0 {
		cfg.RenewBefore = min(DefaultSelfSignedRenewBefore, cfg.Validity/3)
	}
	if cfg.RenewBefore <= 0 || cfg.RenewBefore >= cfg.Validity {
		return nil, fmt.Errorf("tlscert: SelfSignedConfig.RenewBefore is %v: want above 0 and below Validity (%v)", cfg.RenewBefore, cfg.Validity)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("tlscert: %w", err)
	}
	s := &SelfSigned{cfg: cfg}
	if cert, certPEM, err := s.read(); err == nil && s.fits(cert.Leaf) {
		s.cert, s.certPEM = cert, certPEM
		return s, nil
	}
	if err := s.rotate(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *SelfSigned) paths() (certPath, keyPath string) {
	return filepath.Join(s.cfg.Dir, SelfSignedCertFile), filepath.Join(s.cfg.Dir, SelfSignedKeyFile)
}

// read loads the kept pair.
func (s *SelfSigned) read() (*tls.Certificate, []byte, error) {
	certPath, keyPath := s.paths()
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, err
	}
	return &cert, certPEM, nil
}

// fits reports whether leaf is for the configured host and not yet due.
func (s *SelfSigned) fits(leaf *x509.Certificate) bool {
	if leaf == nil || leaf.VerifyHostname(s.cfg.Host) != nil {
		return false
	}
	return s.cfg.NowFunc().Before(leaf.NotAfter.Add(-s.cfg.RenewBefore))
}

// rotate generates a new pair, keeps it (key first, so a crash between
// leaves a mismatched pair that the next open replaces) and serves it.
func (s *SelfSigned) rotate() error {
	key, err := rsa.GenerateKey(rand.Reader, selfSignedKeyBits)
	if err != nil {
		return fmt.Errorf("tlscert: generate a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return fmt.Errorf("tlscert: serial number: %w", err)
	}
	now := s.cfg.NowFunc()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.cfg.Host},
		NotBefore:    now.Add(-time.Minute), // tolerate a client's clock a little behind
		NotAfter:     now.Add(s.cfg.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// A self-signed certificate is its own root: Telegram (and the
		// sandbox) trust it as one once it is uploaded.
		IsCA: true, BasicConstraintsValid: true,
	}
	if ip := net.ParseIP(s.cfg.Host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{s.cfg.Host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("tlscert: create the certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	certPath, keyPath := s.paths()
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("tlscert: %w", err)
	}
	s.mu.Lock()
	s.cert, s.certPEM = &cert, certPEM
	s.mu.Unlock()
	return nil
}

// GetCertificate returns the current certificate. It is a [tls.Config]
// GetCertificate function.
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert, nil
}

// CertificatePEM returns the current certificate in PEM, as setWebhook's
// certificate upload wants it. The caller must not modify it.
func (s *SelfSigned) CertificatePEM() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.certPEM
}

// Leaf returns the current certificate.
func (s *SelfSigned) Leaf() *x509.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert.Leaf
}

// RenewAt is when the current certificate becomes due for rotation.
func (s *SelfSigned) RenewAt() time.Time {
	return s.Leaf().NotAfter.Add(-s.cfg.RenewBefore)
}

// RotateIfDue replaces the certificate when it is due (see RenewAt) and
// reports whether it did. After a rotation, upload [SelfSigned.CertificatePEM]
// with setWebhook: Telegram trusts only the certificate uploaded last. On
// error the current certificate stays in use.
func (s *SelfSigned) RotateIfDue() (bool, error) {
	if s.fits(s.Leaf()) {
		return false, nil
	}
	if err := s.rotate(); err != nil {
		return false, err
	}
	return true, nil
}
