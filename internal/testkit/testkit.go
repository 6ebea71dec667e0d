// Package testkit holds the few helpers tgrelay's own tests share, so that
// no package keeps a copy: a bounded wait for a condition, a buffer safe
// for concurrent writers, a free loopback address, a clock the test moves,
// a raw HTTP/1.1 exchange for requests no client library would write, and
// the process's CPU time, for benchmarks that report CPU per op.
// For an address
// that refuses connections use package closedport; for PostgreSQL,
// pgtest; for goroutine leaks, leakcheck.
//
// It is for tests only and imports nothing of tgrelay's but freeport.
package testkit

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/freeport"
)

// WaitLimit bounds [WaitFor]: generous, because it is reached only by a
// test that fails, and a loaded machine running -race is slow.
const WaitLimit = 45 * time.Second

// pollInterval is how often [WaitFor] checks its condition.
const pollInterval = 5 * time.Millisecond

// WaitFor checks cond every few milliseconds until it holds, and fails tb
// (naming what it waited for) once [WaitLimit] passed. It is for state a
// test cannot get a signal for, such as a server's snapshot or a store's
// rows; where a channel or callback exists, wait on that instead. It must
// be called from the test's goroutine.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", WaitLimit, what)
		}
		time.Sleep(pollInterval) // polling state that has no signal
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent use: a log destination
// that a server's goroutines write while the test reads it. The zero value
// is an empty buffer ready to use; it must not be copied after first use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeAddr returns "127.0.0.1:<port>" of a loopback TCP port that was free
// a moment ago, for a server that must be named before it starts (a
// webhook URL, a flag). The port lies below the kernel's ephemeral range
// (see package freeport), so no outgoing connection can take it meanwhile;
// a test that can listen first and pass the listener should do that instead.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	return addr
}

// RawExchange writes raw, hand-written HTTP/1.1, on a new connection to
// addr, closes the connection's writing half, and returns the status of
// every final response read back (not 100 Continue), until the server
// closes the connection or 5 seconds pass.
func RawExchange(tb testing.TB, addr, raw string) []int {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.WriteString(c, raw); err != nil {
		tb.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(c)
	var codes []int
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return codes
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 200 {
			codes = append(codes, resp.StatusCode)
		}
	}
}

// RawServer listens on loopback and, one connection at a time, reads a
// request and hands the connection and the request (its body unread) to
// serve, which writes whatever raw bytes it likes; the connection is closed
// when serve returns. It returns the server's "http://host:port" and stops
// when the test ends.
func RawServer(tb testing.TB, serve func(c net.Conn, req *http.Request)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	tb.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				serve(c, req)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// Clock is a clock that moves only when the test moves it, for code that
// takes a func() time.Time. Its zero value reads the zero time; it is safe
// for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock d forward (back, for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
