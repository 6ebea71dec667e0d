package intake_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/transport"
)

// TestForeignErrorPageIsAnUnknownOutcome: a proxy in front of Telegram
// passes a handler's send on (it may have arrived) and answers with an
// error page of its own, not Telegram's JSON. The library's error hides
// it, but the runner sees the answer: it is nobody's word that the send did
// not act, so the update is given up as outcome unknown after one attempt,
// never run again to send the message a second time.
func TestForeignErrorPageIsAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusOK, http.StatusBadGateway, http.StatusTooManyRequests, http.StatusForbidden, http.StatusFound} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				calls.Add(1)
				w.Header().Set("Content-Type", "text/html")
				w.Header().Set("Location", "https://example.com/")
				w.WriteHeader(status)
				io.WriteString(w, "<html><body>upstream trouble</body></html>")
			}))
			t.Cleanup(srv.Close)
			client, err := transport.NewClient(transport.Config{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
			if err != nil {
				t.Fatal(err)
			}
			exhausted := make(chan intake.Exhaustion, 1)
			delays := make(chan time.Duration, 8)
			r := newRunner(t, intake.Config{
				Store: memstore.New(),
				Handler: func(ctx context.Context, u intake.Update) error {
					if err := lossyCall(ctx, client, srv.URL); err != nil {
						return err
					}
					return errors.New("lib: the answer is not JSON") // a 200 page
				},
				MaxConcurrent: 1,
				RetryFunc: func(err error, attempt int) (time.Duration, bool) {
					d, ok := intake.DefaultRetry(err, attempt)
					delays <- d
					return d, ok
				},
				ExhaustionHandler: func(_ context.Context, e intake.Exhaustion) error { exhausted <- e; return nil },
			})
			start(t, r)
			mustAccept(t, r, msg(1, 1), intake.Accepted)
			select {
			case d := <-delays:
				if d != 0 {
					t.Fatalf("the send answered by a foreign page is retried after %v; want it given up", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no retry decision within 10s")
			}
			e := <-exhausted
			if e.Attempt != 1 || !strings.HasPrefix(e.Error, "outcome unknown") {
				t.Fatalf("exhaustion = attempt %d %q; want the update given up after 1 attempt as outcome unknown", e.Attempt, e.Error)
			}
			idle(t, r)
			if n := calls.Load(); n != 1 {
				t.Fatalf("the send reached the server %d times; want once", n)
			}
		})
	}
}

// TestFileDownloadIsNoForeignAnswer: a handler downloads a file whose path
// has no extension ("documents/file_5"), answered with its bytes, or posts
// to an endpoint that is no Bot API call (an app's, answering HTML), then
// fails for its own reason. Neither is a Bot API call that acts: the
// update is retried as usual, not given up as an unknown outcome.
func TestFileDownloadIsNoForeignAnswer(t *testing.T) {
	t.Parallel()
	for name, path := range map[string]string{"file": "/file/bot1:x/documents/file_5", "file at the root": "/file/bot1:x/file_5", "app endpoint": "/updates"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testNoForeignAnswer(t, path)
		})
	}
}

func testNoForeignAnswer(t *testing.T, path string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/updates" {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "<html>app error</html>")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, "\x00\x01binary")
	}))
	t.Cleanup(srv.Close)
	client, err := transport.NewClient(transport.Config{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	delays := make(chan time.Duration, 8)
	r := newRunner(t, intake.Config{
		Store: memstore.New(),
		Handler: func(ctx context.Context, u intake.Update) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return errors.New("handler: could not use the answer")
		},
		MaxConcurrent: 1,
		RetryFunc: func(err error, attempt int) (time.Duration, bool) {
			d, _ := intake.DefaultRetry(err, attempt)
			delays <- d
			return d, false // one decision is enough
		},
	})
	start(t, r)
	mustAccept(t, r, msg(1, 1), intake.Accepted)
	select {
	case d := <-delays:
		if d != intake.Backoff(1) {
			t.Fatalf("a handler that failed after %s gets delay %v; want the usual backoff %v", path, d, intake.Backoff(1))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no retry decision within 10s")
	}
	idle(t, r)
}
