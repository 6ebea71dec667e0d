package relay

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// A capped listener holds at most its cap of connections open: the next
// connection is not served until one of them closes, and closing the
// listener ends an Accept that waits.
func TestCapListenerHoldsAtMostItsConnections(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	full := make(chan struct{}, 16)
	l := newCapListener(inner, 2, func() { full <- struct{}{} })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	// request sends one request on c and reads its answer, within wait.
	request := func(c net.Conn, wait time.Duration) error {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Two kept-alive connections take both slots.
	a, b := dial(), dial()
	for _, c := range []net.Conn{a, b} {
		if err := request(c, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// A third connects (the kernel's backlog takes it) but is not served.
	c := dial()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-full:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept never found the slots taken")
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection beyond the cap was answered (%d bytes, %v)", n, err)
	}
	// One of the two ends: the third is served.
	a.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the waiting connection was not served after a slot freed: %v", err)
	}
	resp.Body.Close()

	// The slots are b's and c's now: closing the listener ends the Accept
	// that waits for one.
	d := dial()
	io.WriteString(d, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case <-full:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept never found the slots taken again")
	}
	l.Close()
	select {
	case err := <-served:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Serve returned %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the listener did not end the waiting Accept")
	}
	srv.Close()
}

func TestWebhookConnsFollowsMaxConnections(t *testing.T) {
	for _, tc := range []struct{ maxConnections, want int }{{0, 256}, {40, 256}, {64, 256}, {100, 400}} {
		if got := webhookConns(tc.maxConnections); got != tc.want {
			t.Errorf("webhookConns(%d) = %d, want %d", tc.maxConnections, got, tc.want)
		}
	}
}
