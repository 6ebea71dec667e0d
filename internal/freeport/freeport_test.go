package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low := ephemeralLow()
	for range 20 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if host != "127.0.0.1" || port < lowest || (low-lowest >= 1000 && port >= low) {
			t.Errorf("Addr() = %s; want 127.0.0.1 and a port in [%d, %d)", addr, lowest, low)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listening on %s, which Addr gave: %v", addr, err)
		}
		l.Close()
	}
}

func TestAddrSkipsATakenPort(t *testing.T) {
	t.Parallel()
	// Hold ports Addr might pick; every address it returns must still
	// be one a server can listen on.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 200 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("Addr returned %s, which is taken: %v", addr, err)
		}
		held = append(held, l)
	}
}
