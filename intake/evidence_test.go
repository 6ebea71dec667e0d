package intake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/transport"
)

// replaySafe marks an error the way a journaling RoundTripper does.
type replaySafe struct{ error }

func (e replaySafe) Unwrap() error    { return e.error }
func (e replaySafe) ReplaySafe() bool { return true }

func TestDefaultRetryNeverRepeatsAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	unknown := &transport.OutcomeUnknownError{Err: errors.New("connection reset by peer")}
	rateLimited := &botapi.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests", RetryAfter: time.Second}
	for _, tc := range []struct {
		name  string
		err   error
		delay time.Duration
		retry bool
	}{
		{"unknown through a library's wrapping", fmt.Errorf("lib: send: %w", unknown), 0, false},
		{"unknown outweighs a later 429", errors.Join(rateLimited, unknown), 0, false},
		{"unknown through the replay journal", fmt.Errorf("lib: %w", replaySafe{unknown}), intake.Backoff(2), true},
		{"one journaled and one direct unknown", errors.Join(replaySafe{unknown}, unknown), 0, false},
		{"not dispatched is retried", &transport.NotDispatchedError{Stage: transport.StageConnect}, intake.Backoff(2), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := intake.DefaultRetry(tc.err, 2)
			if d != tc.delay || ok != tc.retry {
				t.Fatalf("DefaultRetry = %v, %v; want %v, %v", d, ok, tc.delay, tc.retry)
			}
		})
	}
}

// lossyCall is a library that keeps only the text of its errors, as some
// do: neither the transport's marks nor Telegram's parameters survive.
func lossyCall(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/bot1:x/sendMessage", strings.NewReader(`{"chat_id":1,"text":"hi"}`))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return errors.New("lib: request failed")
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return errors.New("lib: telegram said no")
	}
	return nil
}

// The runner learns from the transport what the library's error hides: a
// send of unknown outcome ends the update at once as a dead letter that
// says so (the handler ran once), and Telegram's retry_after is honoured.
func TestRunnerReadsTheTransportWhateverTheLibraryReturns(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch calls.Add(1) {
		case 1: // the update whose send is reset: read, then RST
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
		case 2: // the update that is rate-limited once
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 1","parameters":{"retry_after":1}}`)
		default:
			io.WriteString(w, `{"ok":true,"result":{}}`)
		}
	}))
	t.Cleanup(srv.Close)
	client, err := transport.NewClient(transport.Config{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}

	store := memstore.New()
	handled := make(chan time.Time, 8)
	delays := make(chan time.Duration, 8)
	exhausted := make(chan intake.Exhaustion, 1)
	r := newRunner(t, intake.Config{
		Store: store,
		Handler: func(ctx context.Context, u intake.Update) error {
			handled <- time.Now()
			return lossyCall(ctx, client, srv.URL)
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
	<-handled
	e := <-exhausted
	if e.UpdateID != 1 || e.Attempt != 1 || !strings.HasPrefix(e.Error, "outcome unknown, not repeated: lib: request failed") {
		t.Fatalf("exhaustion = %d/%d %q, want update 1 given up after 1 attempt as outcome unknown", e.UpdateID, e.Attempt, e.Error)
	}
	idle(t, r)

	if d := <-delays; d != 0 {
		t.Fatalf("the unknown outcome got a retry delay of %v", d)
	}
	mustAccept(t, r, msg(2, 2), intake.Accepted)
	first := <-handled
	if d := <-delays; d != time.Second {
		t.Fatalf("rate-limited update retried after %v, want Telegram's 1s (not the 5s backoff)", d)
	}
	if second := <-handled; second.Sub(first) < time.Second {
		t.Fatalf("retry ran %v after the first attempt, before its due time", second.Sub(first))
	}
	idle(t, r)
	if got := row(t, store, 2); got.State != intake.StateCompleted || got.Attempts != 2 {
		t.Fatalf("row 2 = %q after %d attempts, want completed after 2", got.State, got.Attempts)
	}
}
