package tlscert_test

import (
	"fmt"
	"os"

	"github.com/tgrelay/tgrelay/internal/tlscert"
)

// A self-signed certificate for a server known by its IP address: kept in
// a directory, served with GetCertificate, uploaded to Telegram as
// CertificatePEM, and replaced by RotateIfDue before it expires.
func ExampleOpenSelfSigned() {
	dir, _ := os.MkdirTemp("", "tlscert-example")
	defer os.RemoveAll(dir)
	ss, err := tlscert.OpenSelfSigned(tlscert.SelfSignedConfig{Dir: dir, Host: "203.0.113.9"})
	if err != nil {
		fmt.Println(err)
		return
	}
	leaf := ss.Leaf()
	fmt.Println("for 203.0.113.9:", leaf.VerifyHostname("203.0.113.9") == nil)
	fmt.Println("renewed 30 days before expiry:", leaf.NotAfter.Sub(ss.RenewAt()))
	rotated, _ := ss.RotateIfDue()
	fmt.Println("rotated now:", rotated)
	// Output:
	// for 203.0.113.9: true
	// renewed 30 days before expiry: 720h0m0s
	// rotated now: false
}
