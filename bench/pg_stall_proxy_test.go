package main

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// The stall proxy holds bytes while stalled, keeps the connection open,
// and delivers them on resume.
func TestStallProxyHoldsAndResumes(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p, err := startStallProxy(func() (net.Conn, error) { return net.Dial("tcp", echo.Addr().String()) })
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(b byte) {
		t.Helper()
		if _, err := c.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 1)
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, got); err != nil || got[0] != b {
			t.Fatalf("echo of %q: %q, %v", b, got, err)
		}
	}
	roundTrip('a')
	p.stall()
	if _, err := c.Write([]byte{'b'}); err != nil {
		t.Fatal(err)
	}
	// Held: nothing comes back while stalled (a read deadline, since
	// absence has no signal), and the connection stays open.
	if err := c.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read while stalled: %d bytes, %v; want a deadline error", n, err)
	}
	p.resume()
	got := make([]byte, 1)
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, got); err != nil || got[0] != 'b' {
		t.Fatalf("after resume: %q, %v; want the held byte", got, err)
	}
	roundTrip('c')
}
