//go:build unix

package closedport_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/tgrelay/tgrelay/internal/closedport"
)

// A connection is refused, and the port cannot be listened on meanwhile.
func TestAddrRefusesAndStaysTaken(t *testing.T) {
	addr := closedport.Addr(t)
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("Dial(%s) connected; want connection refused", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Dial(%s) = %v; want connection refused", addr, err)
		}
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("Listen(%s) succeeded while the port is held", addr)
	}
}
