package forward_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
)

// The direct path sends what net/http would: the same request line, Host,
// User-Agent, length and headers, on one kept-alive connection.
func TestDirectSendsOnOneKeptConnection(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	type seen struct {
		method, uri, host, agent, custom string
		length                           int64
		body                             string
	}
	got := make(chan seen, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, r.UserAgent(), r.Header.Get("X-Custom"), r.ContentLength, string(b)}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	f := newForwarder(t, forward.Config{URL: srv.URL + "/hook?x=1", Header: http.Header{"X-Custom": {"v"}, "Host": {"ignored.example"}}})
	body := `{"update_id":42}`
	for range 5 {
		if err := f.Handle(context.Background(), intake.Update{ID: 42, Body: []byte(body)}, attempt); err != nil {
			t.Fatal(err)
		}
		s := <-got
		want := seen{"POST", "/hook?x=1", strings.TrimPrefix(srv.URL, "http://"), "Go-http-client/1.1", "v", int64(len(body)), body}
		if s != want {
			t.Fatalf("the app saw %+v, want %+v", s, want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 forwards in turn opened %d connections, want 1", n)
	}

	own := newForwarder(t, forward.Config{URL: srv.URL + "/hook", Header: http.Header{"User-Agent": {"mine/1"}}})
	if err := own.Handle(context.Background(), intake.Update{ID: 1, Body: []byte(body)}, attempt); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.agent != "mine/1" {
		t.Fatalf("User-Agent %q, want the configured mine/1", s.agent)
	}
}

// An endpoint that closes each connection after its answer, without
// saying so, fails no forward: the closed connection is seen before the
// next request is written, and a new one carries it.
func TestDirectEndpointClosingIdleConnectionFailsNothing(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{}, 10)
	url := newRawApp(t, func(c net.Conn, done <-chan struct{}) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		c.Close()
		closed <- struct{}{}
	})
	f := newForwarder(t, forward.Config{URL: url, Timeout: 5 * time.Second})
	for i := range 5 {
		if err := f.Handle(context.Background(), intake.Update{ID: int64(i), Body: []byte(`{}`)}, attempt); err != nil {
			t.Fatalf("forward %d: %v", i, err)
		}
		<-closed
	}
}

// CloseIdleConnections closes the kept connection: the endpoint sees it end.
func TestDirectCloseIdleConnections(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{})
	url := newRawApp(t, func(c net.Conn, done <-chan struct{}) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		if _, err := br.ReadByte(); err == io.EOF {
			close(ended)
		}
	})
	f := newForwarder(t, forward.Config{URL: url})
	if err := f.Handle(context.Background(), intake.Update{ID: 1, Body: []byte(`{}`)}, attempt); err != nil {
		t.Fatal(err)
	}
	f.CloseIdleConnections()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the kept connection was not closed")
	}
}

// A forward ends when its context does, and says why; when its own
// timeout strikes first, it fails with context.DeadlineExceeded, as on
// the net/http path.
func TestDirectForwardEndsWithItsContextOrTimeout(t *testing.T) {
	t.Parallel()
	read := make(chan struct{}, 1)
	url := newRawApp(t, func(c net.Conn, done <-chan struct{}) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		read <- struct{}{}
		<-done
	})

	f := newForwarder(t, forward.Config{URL: url, Timeout: time.Hour})
	cause := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-read
		cancel(cause)
	}()
	err := f.Handle(ctx, intake.Update{ID: 1, Body: []byte(`{}`)}, attempt)
	if !errors.Is(err, cause) {
		t.Fatalf("Handle = %v, want the context's cause", err)
	}

	short := newForwarder(t, forward.Config{URL: url, Timeout: 100 * time.Millisecond})
	err = short.Handle(context.Background(), intake.Update{ID: 2, Body: []byte(`{}`)}, attempt)
	<-read
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Handle = %v, want context.DeadlineExceeded", err)
	}
}

// A header value that would break the request is refused by New, and the
// error does not quote it.
func TestHeaderThatWouldBreakTheRequestIsRefused(t *testing.T) {
	t.Parallel()
	for _, h := range []http.Header{
		{"X-Token": {"secret-value\r\nX-Injected: 1"}},
		{"Bad Name": {"v"}},
	} {
		_, err := forward.New(forward.Config{URL: "http://127.0.0.1:1/hook", Header: h})
		var ce *forward.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Header" {
			t.Fatalf("New with header %q = %v, want a ConfigError of Header", h, err)
		}
		if strings.Contains(err.Error(), "secret-value") {
			t.Fatalf("the error quotes the value: %v", err)
		}
	}
}

// Forwards at once share the pool without losing or mixing answers: each
// update's forward gets its own answer back.
func TestDirectConcurrentForwardsGetTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"method":"sendMessage","chat_id":`+r.Header.Get("Tgrelay-Update-Id")+`,"text":"x"}`)
	}))
	t.Cleanup(srv.Close)
	rep := &matchingReplier{t: t, seen: map[int64]bool{}}
	f := newForwarder(t, forward.Config{URL: srv.URL, Replier: rep})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			a := intake.Attempt{Identity: intake.Identity{UpdateID: int64(i), Attempt: 1, ClaimID: "c"}}
			if err := f.Handle(context.Background(), intake.Update{ID: int64(i), Body: []byte(`{}`)}, a); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(rep.seen) != 64 {
		t.Fatalf("%d updates' replies performed, want 64", len(rep.seen))
	}
}

// matchingReplier checks that each reply it performs was the answer to
// its own update: the app put the update's id in chat_id.
type matchingReplier struct {
	t    *testing.T
	mu   sync.Mutex
	seen map[int64]bool
}

func (m *matchingReplier) Reply(_ context.Context, id intake.Identity, method string, params []byte) (int, string, bool) {
	var p struct {
		ChatID int64 `json:"chat_id"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ChatID != id.UpdateID || method != "sendMessage" {
		m.t.Errorf("update %d got the reply %s %s", id.UpdateID, method, params)
	}
	m.mu.Lock()
	m.seen[id.UpdateID] = true
	m.mu.Unlock()
	return http.StatusOK, "answered", false
}

// An answer whose head never ends is cut at the bound, not read until the
// timeout.
func TestDirectAnswerHeadIsBounded(t *testing.T) {
	t.Parallel()
	url := newRawApp(t, func(c net.Conn, done <-chan struct{}) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("x", 1000) + "\r\n"
		for {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	f := newForwarder(t, forward.Config{URL: url, Timeout: time.Minute})
	err := f.Handle(context.Background(), intake.Update{ID: 1, Body: []byte(`{}`)}, attempt)
	if err == nil || !strings.Contains(err.Error(), "answer head exceeds") {
		t.Fatalf("Handle = %v, want the head's bound", err)
	}
}

// A claim id that would break the request (a store row tampered with) is
// refused before anything is written: the app receives nothing. So is a
// forward whose context ended before it began.
func TestDirectBadHeaderValueSendsNothing(t *testing.T) {
	t.Parallel()
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	t.Cleanup(srv.Close)
	f := newForwarder(t, forward.Config{URL: srv.URL})
	// A first forward leaves a kept connection, which the bad one must not
	// spend either.
	if err := f.Handle(context.Background(), intake.Update{ID: 1, Body: []byte(`{}`)}, attempt); err != nil {
		t.Fatal(err)
	}
	// A forward whose context has ended sends nothing on it.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Handle(ended, intake.Update{ID: 3, Body: []byte(`{}`)}, attempt); !errors.Is(err, context.Canceled) {
		t.Fatalf("Handle in an ended context = %v, want context.Canceled", err)
	}
	bad := intake.Attempt{Identity: intake.Identity{UpdateID: 2, Attempt: 1, ClaimID: "c\r\nX-Injected: 1"}}
	err := f.Handle(context.Background(), intake.Update{ID: 2, Body: []byte(`{}`)}, bad)
	if err == nil || !strings.Contains(err.Error(), "invalid request header value of Tgrelay-Claim-Id") {
		t.Fatalf("Handle = %v, want the invalid header refused", err)
	}
	if n := got.Load(); n != 1 {
		t.Fatalf("the app received %d requests, want only the first", n)
	}
}

// An answer that forbids its connection another request (Connection:
// close, HTTP/1.0, or a body longer than the forward reads) has its
// connection closed: the next forward goes on a new one, even when the
// endpoint keeps the old one open and would read a request there.
func TestDirectAnswerThatForbidsReuseClosesItsConnection(t *testing.T) {
	t.Parallel()
	// A body one byte longer than the forward reads, whose last byte has
	// not come yet when the forward is done with it.
	long := strings.Repeat("x", forward.DefaultMaxResponseBytes)
	for name, first := range map[string]string{
		"Connection: close":       "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.0":                "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
		"a body longer than read": "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(long)+1) + "\r\n\r\n" + long,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var conns, reused atomic.Int32
			url := newRawApp(t, func(c net.Conn, done <-chan struct{}) {
				br := bufio.NewReader(c)
				if _, err := readRequest(br); err != nil {
					return
				}
				if conns.Add(1) > 1 {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
					return
				}
				io.WriteString(c, first)
				if _, err := readRequest(br); err == nil {
					reused.Add(1)
					c.Close() // never answered
				}
			})
			f := newForwarder(t, forward.Config{URL: url, Timeout: 10 * time.Second})
			for i := range 2 {
				if err := f.Handle(context.Background(), intake.Update{ID: int64(i), Body: []byte(`{}`)}, attempt); err != nil {
					t.Fatalf("forward %d: %v", i, err)
				}
			}
			if n := reused.Load(); n != 0 || conns.Load() != 2 {
				t.Fatalf("the second forward went on the first answer's connection (%d connections)", conns.Load())
			}
		})
	}
}

// A request the endpoint took whole on a kept connection and then closed
// without an answer may have been acted on: the forward fails, to be
// retried as a new attempt, and is never sent again on a new connection.
func TestDirectRequestTakenOnKeptConnectionIsNotResent(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	url := newRawApp(t, func(c net.Conn, done <-chan struct{}) {
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			if requests.Add(1) == 2 {
				c.Close() // the second request, taken and never answered
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	f := newForwarder(t, forward.Config{URL: url, Timeout: 10 * time.Second})
	if err := f.Handle(context.Background(), intake.Update{ID: 1, Body: []byte(`{}`)}, attempt); err != nil {
		t.Fatal(err)
	}
	if err := f.Handle(context.Background(), intake.Update{ID: 2, Body: []byte(`{}`)}, attempt); err == nil {
		t.Fatal("Handle = nil for a request the endpoint never answered")
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("the endpoint received %d requests, want 2: the unanswered one was sent again", n)
	}
}
