package forward_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
)

// rawApp is an app endpoint on a real loopback listener that answers each
// connection with serve, raw TCP, as no net/http server would.
type rawApp struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
	done  chan struct{}
}

func newRawApp(t *testing.T, serve func(c net.Conn, done <-chan struct{})) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &rawApp{ln: ln, done: make(chan struct{})}
	a.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.mu.Lock()
			a.conns = append(a.conns, c)
			a.mu.Unlock()
			a.wg.Go(func() { serve(c, a.done) })
		}
	})
	t.Cleanup(func() {
		close(a.done)
		ln.Close()
		a.mu.Lock()
		for _, c := range a.conns {
			c.Close()
		}
		a.mu.Unlock()
		a.wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/hook"
}

// readRequest reads one request and its body from br.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return req, err
}

// hostileCase is one misbehaving app: wantErr says whether the forward
// must fail (and so be retried) rather than complete the update.
type hostileCase struct {
	name    string
	serve   func(c net.Conn, done <-chan struct{})
	wantErr bool
}

func answerWith(raw string) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, done <-chan struct{}) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, raw)
		<-done
	}
}

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// TestHostileAppsAreBoundedAndNeverComplete forwards to apps that fail in
// every way a network and a buggy server can: each forward ends within the
// timeout, and none but the well-formed answers completes its update.
func TestHostileAppsAreBoundedAndNeverComplete(t *testing.T) {
	t.Parallel()
	const timeout = 400 * time.Millisecond
	cases := []hostileCase{
		{name: "accepts and never answers", wantErr: true, serve: func(c net.Conn, done <-chan struct{}) { <-done }},
		{name: "reads the request and never answers", wantErr: true, serve: answerWith("")},
		{name: "headers then stalls the body", wantErr: true,
			serve: answerWith("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")},
		{name: "body shorter than Content-Length then close", wantErr: true, serve: func(c net.Conn, done <-chan struct{}) {
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
			c.Close()
		}},
		{name: "close after headers", wantErr: true, serve: func(c net.Conn, done <-chan struct{}) {
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n")
			c.Close()
		}},
		{name: "reset mid-request", wantErr: true, serve: func(c net.Conn, done <-chan struct{}) {
			buf := make([]byte, 10)
			io.ReadFull(c, buf)
			reset(c)
		}},
		{name: "reset mid-response", wantErr: true, serve: func(c net.Conn, done <-chan struct{}) {
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			// Whether the RST overtakes the bytes or not, the 200 is
			// never whole.
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"method\":\"sendMe")
			reset(c)
		}},
		{name: "1xx then nothing", wantErr: true, serve: answerWith("HTTP/1.1 102 Processing\r\n\r\n")},
		{name: "100 continue then nothing", wantErr: true, serve: answerWith("HTTP/1.1 100 Continue\r\n\r\n")},
		{name: "chunked never terminates", wantErr: true,
			serve: answerWith("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n")},
		{name: "chunked cut by close", wantErr: true, serve: func(c net.Conn, done <-chan struct{}) {
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n")
			c.Close()
		}},
		{name: "garbage status line", wantErr: true, serve: answerWith("HTTX/9 two hundred\r\n\r\n")},
		{name: "HTTP/0.9 style answer", wantErr: true, serve: answerWith("ok\n")},
		{name: "malformed status with a secret", wantErr: true, serve: answerWith("HTTP/1.1 hostile-secret OK\r\n\r\n")},
		{name: "malformed header with a secret", wantErr: true, serve: answerWith("HTTP/1.1 200 OK\r\nhostile-secret\r\n\r\n")},
		{name: "status 999", wantErr: true, serve: answerWith("HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n")},
		{name: "slowloris headers", wantErr: true, serve: func(c net.Conn, done <-chan struct{}) {
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			for _, b := range []byte("HTTP/1.1 200 OK\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n") {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond): // the trickle itself
				}
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
			}
		}},
		{name: "slowloris body", wantErr: true, serve: func(c net.Conn, done <-chan struct{}) {
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
			for range 100 {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond): // the trickle itself
				}
				if _, err := c.Write([]byte{' '}); err != nil {
					return
				}
			}
		}},
		{name: "HTTP/1.0 keep-alive 200", wantErr: false,
			serve: answerWith("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok")},
		{name: "HTTP/1.0 200 until close", wantErr: false, serve: func(c net.Conn, done <-chan struct{}) {
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nok")
			c.Close()
		}},
		{name: "307 to another host", wantErr: true,
			serve: answerWith("HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.2:1/x\r\nContent-Length: 0\r\n\r\n")},
		{name: "302 to another host", wantErr: true,
			serve: answerWith("HTTP/1.1 302 Found\r\nLocation: http://example.invalid/x\r\nContent-Length: 0\r\n\r\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := newRawApp(t, tc.serve)
			f := newForwarder(t, forward.Config{URL: url, Timeout: timeout})
			start := time.Now()
			err := f.Handle(context.Background(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt)
			took := time.Since(start)
			if tc.wantErr && err == nil {
				t.Fatalf("Handle = nil: the update would complete")
			}
			if !tc.wantErr && err != nil {
				t.Fatalf("Handle = %v, want nil", err)
			}
			if err != nil && strings.Contains(err.Error(), "hostile-secret") {
				t.Fatalf("Handle = %v: it quotes the answer, which may carry a secret", err)
			}
			if took > timeout+2*time.Second {
				t.Fatalf("Handle took %v with a %v timeout", took, timeout)
			}
			t.Logf("took %v: %v", took.Round(time.Millisecond), err)
		})
	}
}

// A body longer than its Content-Length must not be taken as the answer
// to the next forward on the same connection.
func TestBodyLongerThanContentLengthIsNotTheNextAnswer(t *testing.T) {
	t.Parallel()
	var n sync.Mutex
	count := 0
	url := newRawApp(t, func(c net.Conn, done <-chan struct{}) {
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			n.Lock()
			count++
			first := count == 1
			n.Unlock()
			if first {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				continue
			}
			io.WriteString(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
		}
	})
	f := newForwarder(t, forward.Config{URL: url, Timeout: 2 * time.Second})
	if err := f.Handle(context.Background(), intake.Update{ID: 1, Body: []byte(`{"update_id":1}`)}, attempt); err != nil {
		t.Fatalf("first: %v", err)
	}
	err := f.Handle(context.Background(), intake.Update{ID: 2, Body: []byte(`{"update_id":2}`)}, attempt)
	if err == nil {
		t.Fatalf("second forward completed on the first answer's excess bytes")
	}
	t.Logf("second: %v", err)
}

// A gigantic answer is read only up to the bound.
func TestGiganticAnswerIsBounded(t *testing.T) {
	t.Parallel()
	url := newRawApp(t, func(c net.Conn, done <-chan struct{}) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n")
		chunk := []byte(strings.Repeat("x", 32<<10))
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	f := newForwarder(t, forward.Config{URL: url, Timeout: 5 * time.Second})
	start := time.Now()
	err := f.Handle(context.Background(), intake.Update{ID: 1, Body: []byte(`{"update_id":1}`)}, attempt)
	t.Logf("took %v: %v", time.Since(start), err)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read the gigantic body to the timeout")
	}
}
