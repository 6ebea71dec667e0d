package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// LetsEncryptURL is the ACME directory of Let's Encrypt's production CA,
// the default of [ACMEConfig.DirectoryURL].
const LetsEncryptURL = autocert.DefaultACMEDirectory

// acmeTimeout bounds one request to the ACME CA.
const acmeTimeout = 30 * time.Second

// ACMEConfig configures [NewACME].
type ACMEConfig struct {
	// Host is the one DNS name certificates are obtained for (not an IP
	// address). Required.
	Host string
	// CacheDir keeps the ACME account key and the certificates (created,
	// mode 0700), so a restart reuses them. Required.
	CacheDir string
	// DirectoryURL is the CA's ACME directory. Empty means LetsEncryptURL.
	DirectoryURL string
	// Email is the contact address given to the CA (expiry notices).
	// Empty means none.
	Email string
	// RootCAs are the roots trusted for the CA's own HTTPS (a test CA's).
	// Nil means the system's roots.
	RootCAs *x509.CertPool
	// Proxy is the proxy of requests to the CA. Nil means none.
	Proxy func(*http.Request) (*url.URL, error)
	// RenewBefore is how long before expiry a certificate is renewed (less
	// a random tenth). Zero means autocert's default: a third of the
	// certificate's validity, at most 30 days (30 days for Let's
	// Encrypt's 90-day certificates).
	RenewBefore time.Duration
}

// NewACME returns a certificate manager for cfg.Host: on the first TLS
// handshake for that name it obtains a certificate from the CA, proving the
// name by the tls-alpn-01 challenge on the same listener (so the CA must
// reach the host on port 443); it keeps it in cfg.CacheDir and renews it
// on its own before it expires (see ACMEConfig.RenewBefore).
// Serve with [ACMETLSConfig]. Handshakes for other names are refused.
func NewACME(cfg ACMEConfig) (*autocert.Manager, error) {
	if cfg.Host == "" || cfg.CacheDir == "" {
		return nil, errors.New("tlscert: ACMEConfig needs Host and CacheDir")
	}
	if net.ParseIP(cfg.Host) != nil {
		return nil, errors.New("tlscert: ACME certificates are for a DNS name, not an IP address")
	}
	dir := cfg.DirectoryURL
	if dir == "" {
		dir = LetsEncryptURL
	}
	tr := &http.Transport{
		Proxy:               cfg.Proxy,
		TLSClientConfig:     &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: acmeTimeout,
		IdleConnTimeout:     time.Minute,
	}
	return &autocert.Manager{
		Prompt:      autocert.AcceptTOS,
		Cache:       autocert.DirCache(cfg.CacheDir),
		HostPolicy:  autocert.HostWhitelist(cfg.Host),
		Email:       cfg.Email,
		RenewBefore: cfg.RenewBefore,
		Client: &acme.Client{
			DirectoryURL: dir,
			HTTPClient:   &http.Client{Transport: tr, Timeout: acmeTimeout},
		},
	}, nil
}

// ACMETLSConfig returns a server TLS configuration serving m's
// certificates and answering its tls-alpn-01 challenges.
func ACMETLSConfig(m *autocert.Manager) *tls.Config {
	c := m.TLSConfig()
	c.MinVersion = tls.VersionTLS12
	return c
}

// ECDSAHello is a TLS ClientHello for host from a client that accepts
// ECDSA certificates, as Telegram's does: pass it to an autocert Manager's
// GetCertificate to obtain (or load) the certificate such clients get,
// before any client connects.
func ECDSAHello(host string) *tls.ClientHelloInfo {
	return &tls.ClientHelloInfo{
		ServerName:        host,
		CipherSuites:      []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		SupportedCurves:   []tls.CurveID{tls.CurveP256},
		SignatureSchemes:  []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
		SupportedVersions: []uint16{tls.VersionTLS13, tls.VersionTLS12},
	}
}
