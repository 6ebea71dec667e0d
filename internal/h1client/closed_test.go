//go:build unix

package h1client_test

import (
	"net"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/h1client"
)

// pair returns both ends of a loopback TCP connection.
func pair(t *testing.T) (ours, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	ours, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer = <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { ours.Close(); peer.Close() })
	return ours, peer
}

// waitClosed polls Closed, which never blocks, until it reports true or
// the bound passes: the peer's bytes or FIN reach our socket a moment
// after its call returns.
func waitClosed(c net.Conn) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if h1client.Closed(c) {
			return true
		}
	}
	return false
}

func TestClosed(t *testing.T) {
	t.Parallel()
	t.Run("quiet connection is usable", func(t *testing.T) {
		ours, _ := pair(t)
		if h1client.Closed(ours) {
			t.Fatal("a quiet open connection reported closed")
		}
	})
	t.Run("peer closed", func(t *testing.T) {
		ours, peer := pair(t)
		peer.Close()
		if !waitClosed(ours) {
			t.Fatal("a connection the peer closed reported usable")
		}
	})
	t.Run("peer wrote unasked", func(t *testing.T) {
		ours, peer := pair(t)
		peer.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
		if !waitClosed(ours) {
			t.Fatal("a connection with bytes nobody asked for reported usable")
		}
		// The peek leaves the bytes where they were.
		buf := make([]byte, 4)
		ours.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := ours.Read(buf); err != nil || string(buf[:n]) != "HTTP" {
			t.Fatalf("read %q, %v after the peek", buf[:n], err)
		}
	})
	t.Run("no file descriptor", func(t *testing.T) {
		ours, peer := net.Pipe()
		defer ours.Close()
		peer.Close()
		if h1client.Closed(ours) {
			t.Fatal("a connection without a socket reported closed")
		}
	})
}
