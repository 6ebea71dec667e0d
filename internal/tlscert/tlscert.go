// Package tlscert provides the certificates `tgrelay serve` answers HTTPS
// with, each as a tls.Config GetCertificate function:
//
//   - [Files]: a certificate and key from files, reloaded when they change
//     (checked at each handshake) or on [Files.Reload], so a renewal by
//     certbot or a secret mount takes effect without a restart and without
//     closing a connection;
//   - [SelfSigned]: a certificate generated for a host name or IP address,
//     kept in a directory, and rotated before it expires (the caller uploads
//     it to Telegram with setWebhook after each rotation);
//   - [NewACME]: certificates from an ACME CA such as Let's Encrypt, by
//     golang.org/x/crypto/acme/autocert, cached in a directory and renewed
//     on their own.
//
// Files are written atomically (a temporary file, fsynced, then renamed),
// private keys with mode 0600.
package tlscert

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic writes data to path through a temporary file in the
// same directory, fsynced, then renamed over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("tlscert: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("tlscert: write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("tlscert: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("tlscert: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("tlscert: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tlscert: write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename itself; best effort where directories cannot be synced
		d.Close()
	}
	return nil
}
