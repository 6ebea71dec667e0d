package telegramtest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

// Telegram's own words for the webhook failures a strict delivery reports in
// getWebhookInfo's last_error_message, and for setWebhook's refusals.
const (
	// ErrMsgCertVerify is reported when the certificate is not trusted (not
	// issued by a trusted root, nor the uploaded certificate), has expired,
	// or does not name the webhook's host or IP address.
	ErrMsgCertVerify = "SSL error {error:0A000086:SSL routines::certificate verify failed}"
	// ErrMsgWrongVersion is reported when the webhook's port does not speak
	// TLS (a plain HTTP server).
	ErrMsgWrongVersion = "SSL error {error:0A00010B:SSL routines::wrong version number}"
	// ErrMsgHandshake is reported for another TLS handshake failure.
	ErrMsgHandshake = "SSL error {error:0A000410:SSL routines::sslv3 alert handshake failure}"
	// ErrMsgConnectionRefused is reported when nothing listens.
	ErrMsgConnectionRefused = "Connection refused"
	// ErrMsgNotHTTPS is setWebhook's refusal of an http:// address in strict
	// mode (after "Bad Request: ").
	ErrMsgNotHTTPS = "bad webhook: An HTTPS URL must be provided for webhook"
	// ErrMsgPort is setWebhook's refusal of a port Telegram does not deliver
	// to, in strict mode (after "Bad Request: ").
	ErrMsgPort = "bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443"
	// ErrMsgBadCertificate is setWebhook's refusal of an uploaded
	// certificate that is not a PEM (or DER) X.509 certificate (after "Bad
	// Request: ").
	ErrMsgBadCertificate = "bad webhook: Failed to set custom certificate file"
)

// strictHandshakeTimeout bounds a strict delivery's TLS handshake.
const strictHandshakeTimeout = 10 * time.Second

// checkStrictURL refuses, as Telegram does, a webhook address that is not
// https or not on one of the ports Telegram delivers to.
func checkStrictURL(u *url.URL) *apiError {
	if u.Scheme != "https" {
		return badRequest(ErrMsgNotHTTPS)
	}
	if port, err := botapi.WebhookPort(u); err != nil || !botapi.ValidWebhookPort(port) {
		return badRequest(ErrMsgPort)
	}
	return nil
}

// parseUploadedCert reads setWebhook's certificate file: the first PEM
// CERTIFICATE block, or DER.
func parseUploadedCert(data []byte) (*x509.Certificate, error) {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
	return x509.ParseCertificate(data)
}

// certVerifyError is a strict delivery's refusal of the webhook's
// certificate.
type certVerifyError struct{ err error }

func (e *certVerifyError) Error() string {
	return "telegramtest: webhook certificate: " + e.err.Error()
}
func (e *certVerifyError) Unwrap() error { return e.err }

// newStrictClient returns the client of strict deliveries to u: it dials
// through cfg.DialContextFunc, and accepts only a certificate chain for u's
// host (name or IP address) that leads to the uploaded certificate, when
// one was uploaded, or else to cfg.RootCAs (nil: the system's roots).
func newStrictClient(cfg WebhookConfig, u *url.URL, uploaded *x509.Certificate) *http.Client {
	roots := cfg.RootCAs
	if uploaded != nil {
		roots = x509.NewCertPool()
		roots.AddCert(uploaded)
	}
	host := u.Hostname()
	dial := cfg.DialContextFunc
	if dial == nil {
		dial = (&net.Dialer{Timeout: cfg.Timeout}).DialContext
	}
	verify := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return &certVerifyError{errors.New("no certificate")}
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			Roots: roots, Intermediates: inter, DNSName: host,
		})
		if err != nil {
			return &certVerifyError{err}
		}
		return nil
	}
	return &http.Client{Transport: &http.Transport{
		DialContext: dial,
		TLSClientConfig: &tls.Config{
			ServerName: host,
			// Verification is VerifyConnection's: against the uploaded
			// certificate or the given roots, for the URL's name or IP.
			InsecureSkipVerify: true,
			VerifyConnection:   verify,
			MinVersion:         tls.VersionTLS12,
		},
		TLSHandshakeTimeout: strictHandshakeTimeout,
		// A fresh connection, and so a fresh handshake, per delivery: a
		// certificate served since is seen at once, and no idle connection
		// outlives the server.
		DisableKeepAlives: true,
	}}
}

// strictErrorMessage words a failed strict delivery as Telegram does, or
// returns "" when err is not a TLS failure.
func strictErrorMessage(err error) string {
	var cv *certVerifyError
	var rh tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case errors.As(err, &cv):
		return ErrMsgCertVerify
	case errors.As(err, &rh), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// net/http replaces the record header error of a plain HTTP
		// answer with an untyped one.
		return ErrMsgWrongVersion
	case errors.As(err, &alert):
		return ErrMsgHandshake
	}
	return ""
}
