package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files serves a certificate and key read from two PEM files, and reads
// them again when either changes (its modification time or size), checked
// at each TLS handshake, or when [Files.Reload] is called (on SIGHUP). A
// pair that does not load (a renewal caught half-written, a key that does
// not match) keeps the previous certificate in use and is reported to
// ErrorFunc; the next handshake tries again. Connections already open are
// never closed: only new handshakes see the new certificate. A Files is
// safe for concurrent use.
type Files struct {
	certFile, keyFile string
	errorFunc         func(error)

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp // of certFile and keyFile when cert was read
	failed  [2]fileStamp // of the last pair that did not load, reported once
	reloads int
}

// fileStamp is what tells a changed file.
type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadFiles reads the certificate chain in certFile and its private key in
// keyFile (PEM). errorFunc, when not nil, is told of each later reload that
// fails (once per change of the files); it must not block.
func LoadFiles(certFile, keyFile string, errorFunc func(error)) (*Files, error) {
	f := &Files{certFile: certFile, keyFile: keyFile, errorFunc: errorFunc}
	st, err := f.stat()
	if err != nil {
		return nil, err
	}
	cert, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cert, f.stamp = cert, st
	return f, nil
}

func (f *Files) stat() ([2]fileStamp, error) {
	var st [2]fileStamp
	for i, p := range []string{f.certFile, f.keyFile} {
		fi, err := os.Stat(p)
		if err != nil {
			return st, fmt.Errorf("tlscert: %w", err)
		}
		st[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return st, nil
}

func (f *Files) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("tlscert: load %s and %s: %w", f.certFile, f.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tlscert: parse %s: %w", f.certFile, err)
		}
	}
	return &cert, nil
}

// GetCertificate returns the current certificate, reading the files again
// first when they changed. It is a [tls.Config] GetCertificate function.
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, err := f.stat(); err == nil && st != f.stamp && st != f.failed {
		f.reloadLocked(st)
	}
	return f.cert, nil
}

// Reload reads the files now, whether or not they look changed. On error
// the previous certificate stays in use.
func (f *Files) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := f.stat()
	if err != nil {
		return err
	}
	cert, err := f.load()
	if err != nil {
		return err
	}
	f.cert, f.stamp, f.failed = cert, st, [2]fileStamp{}
	f.reloads++
	return nil
}

func (f *Files) reloadLocked(st [2]fileStamp) {
	cert, err := f.load()
	if err != nil {
		f.failed = st
		if f.errorFunc != nil {
			f.errorFunc(fmt.Errorf("%w (still serving the certificate loaded before)", err))
		}
		return
	}
	f.cert, f.stamp, f.failed = cert, st, [2]fileStamp{}
	f.reloads++
}

// Leaf returns the certificate in use.
func (f *Files) Leaf() *x509.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cert.Leaf
}

// Reloads counts the successful reloads since LoadFiles.
func (f *Files) Reloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloads
}
