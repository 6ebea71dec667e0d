package h1client_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/h1client"
)

func connPool(maxIdle int, idleTimeout time.Duration, reap bool, now func() time.Time) *h1client.Pool[net.Conn] {
	return h1client.NewPool(h1client.PoolConfig[net.Conn]{
		Max:         maxIdle,
		IdleTimeout: idleTimeout,
		Usable:      func(c net.Conn) bool { return !h1client.Closed(c) },
		Close:       func(c net.Conn) { c.Close() },
		Reap:        reap,
		Now:         now,
	})
}

// Get lends the most recently returned connection first, and none once
// the pool is empty.
func TestPoolLendsTheLatestFirst(t *testing.T) {
	t.Parallel()
	p := connPool(4, time.Hour, false, nil)
	defer p.CloseIdle()
	a, _ := net.Pipe()
	b, _ := net.Pipe()
	p.Put(a)
	p.Put(b)
	if c, ok := p.Get(); !ok || c != b {
		t.Fatalf("Get = %v, %v; want the latest", c, ok)
	}
	if c, ok := p.Get(); !ok || c != a {
		t.Fatalf("Get = %v, %v; want the earlier", c, ok)
	}
	if _, ok := p.Get(); ok {
		t.Fatal("Get lent from an empty pool")
	}
}

// A connection idle for the timeout, or no longer usable, is closed
// rather than lent.
func TestPoolClosesExpiredAndUnusable(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	p := connPool(4, time.Minute, false, func() time.Time { return now })
	old, oldPeer := net.Pipe()
	p.Put(old)
	now = now.Add(time.Minute)
	if _, ok := p.Get(); ok {
		t.Fatal("lent a connection idle for the whole timeout")
	}
	oldPeer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := oldPeer.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the expired connection's peer read %v, want EOF", err)
	}

	unusable := h1client.NewPool(h1client.PoolConfig[net.Conn]{
		Max: 4, IdleTimeout: time.Hour,
		Usable: func(net.Conn) bool { return false },
		Close:  func(c net.Conn) { c.Close() },
	})
	c, peer := net.Pipe()
	unusable.Put(c)
	if _, ok := unusable.Get(); ok {
		t.Fatal("lent an unusable connection")
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := peer.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the unusable connection's peer read %v, want EOF", err)
	}
}

// A pool keeps at most Max connections and closes the rest.
func TestPoolIsBounded(t *testing.T) {
	t.Parallel()
	p := connPool(2, time.Hour, false, nil)
	defer p.CloseIdle()
	var peers []net.Conn
	for range 3 {
		ours, peer := net.Pipe()
		peers = append(peers, peer)
		p.Put(ours)
	}
	if n := len(p.Idle()); n != 2 {
		t.Fatalf("%d idle, want 2", n)
	}
	peers[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := peers[2].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the third connection's peer read %v, want EOF", err)
	}
}

// With Reap, an idle connection is closed once it has waited the
// timeout: the peer sees it end, and the pool is empty.
func TestPoolReapsIdleConnections(t *testing.T) {
	t.Parallel()
	p := connPool(4, 20*time.Millisecond, true, nil)
	ours, peer := net.Pipe()
	p.Put(ours)
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := peer.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the idle connection's peer read %v, want EOF once reaped", err)
	}
	if n := len(p.Idle()); n != 0 {
		t.Fatalf("%d idle after the reap, want 0", n)
	}
}
