// Command quickstart shows the intake end to end in a few seconds: a Runner
// over the in-memory store behind a real HTTP server on loopback, with the
// webhook handler, receiving a handful of updates — a duplicate, a
// malformed one, one with a wrong secret, one whose handler fails twice and
// then succeeds, and one that always fails and ends as an exhaustion that is
// delivered and acknowledged.
//
//	go run ./examples/quickstart
//
// It exits non-zero if anything unexpected happened.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

const secret = "quickstart-secret"

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// journal keeps what happened to each update, printed at the end in update
// order so the output reads the same on every run.
type journal struct {
	mu     sync.Mutex
	events map[int64][]string
}

func (j *journal) add(id int64, format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events[id] = append(j.events[id], fmt.Sprintf(format, args...))
}

func run(ctx context.Context, out io.Writer) error {
	store := memstore.New()
	j := &journal{events: map[int64][]string{}}
	var (
		mu       sync.Mutex
		attempts = map[int64]int{}
	)
	exhausted := make(chan intake.Exhaustion, 1)
	flakyDone := make(chan struct{})

	r, err := intake.New(intake.Config{
		Store: store,
		AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
			var upd struct {
				Message struct {
					Text string `json:"text"`
				} `json:"message"`
			}
			if err := u.Decode(&upd); err != nil {
				return intake.Abandon(err)
			}
			mu.Lock()
			attempts[u.ID]++
			mu.Unlock()
			switch text := upd.Message.Text; {
			case text == "flaky" && a.Attempt < 3:
				return fmt.Errorf("downstream unavailable (attempt %d)", a.Attempt)
			case text == "doomed":
				return errors.New("this update can never be handled")
			default:
				j.add(u.ID, "attempt %d handled %q", a.Attempt, text)
				if text == "flaky" {
					close(flakyDone)
				}
				return nil
			}
		},
		ExhaustionHandler: func(ctx context.Context, e intake.Exhaustion) error {
			j.add(e.UpdateID, "exhaustion delivered after attempt %d: %s", e.Attempt, e.Error)
			exhausted <- e
			return nil // acknowledges it
		},
		// Short timings so the demo ends in moments; production keeps the
		// defaults (2 min leases, 5 s × 4ⁿ backoff).
		RetryFunc:     func(error, int) (time.Duration, bool) { return 100 * time.Millisecond, true },
		MaxAttempts:   3,
		LeaseDuration: 2 * time.Second,
		SweepInterval: 50 * time.Millisecond,
		Observer: intake.Observer{
			FailureFunc: func(f intake.Failure) {
				next := "will retry"
				if !f.Retrying {
					next = "given up"
				}
				j.add(f.UpdateID, "attempt %d failed (%v), %s", f.Attempt, f.Err, next)
			},
			AcknowledgeFunc: func(id intake.Identity) { j.add(id.UpdateID, "exhaustion acknowledged") },
		},
	})
	if err != nil {
		return err
	}
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, Secret: secret})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/telegram", wh)
	srv := httptest.NewServer(mux) // loopback, a system-chosen port
	defer srv.Close()

	if err := r.Start(ctx); err != nil {
		return err
	}
	defer r.Close(context.Background())

	fmt.Fprintf(out, "webhook listening on %s/telegram\n\n", srv.URL)
	var problems []string
	for _, p := range []struct {
		what, secret, body string
		want               int
	}{
		{"update 1, a greeting", secret, `{"update_id":1,"message":{"chat":{"id":10},"text":"hello"}}`, 200},
		{"update 1 again (Telegram re-sent it)", secret, `{"update_id":1,"message":{"chat":{"id":10},"text":"hello"}}`, 200},
		{"update 2, fails twice then succeeds", secret, `{"update_id":2,"message":{"chat":{"id":20},"text":"flaky"}}`, 200},
		{"update 3, always fails", secret, `{"update_id":3,"message":{"chat":{"id":30},"text":"doomed"}}`, 200},
		{"a body that is not an update", secret, `{"message":{"text":"no update_id"}}`, 400},
		{"update 4 with a wrong secret", "not-the-secret", `{"update_id":4,"message":{"chat":{"id":40},"text":"forged"}}`, 403},
	} {
		status, err := post(ctx, srv, p.secret, p.body)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "POST %-40s -> %d\n", p.what, status)
		if status != p.want {
			problems = append(problems, fmt.Sprintf("%s answered %d, want %d", p.what, status, p.want))
		}
	}

	// Wait for update 2's success and update 3's exhaustion, then for
	// everything in flight to settle.
	var exh intake.Exhaustion
	select {
	case exh = <-exhausted:
	case <-ctx.Done():
		return fmt.Errorf("no exhaustion within the time limit: %w", ctx.Err())
	}
	select {
	case <-flakyDone:
	case <-ctx.Done():
		return fmt.Errorf("update 2 not handled within the time limit: %w", ctx.Err())
	}
	if err := r.Idle(ctx); err != nil {
		return err
	}
	if err := r.Close(ctx); err != nil {
		return err
	}

	fmt.Fprintln(out)
	j.mu.Lock()
	ids := make([]int64, 0, len(j.events))
	for id := range j.events {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(out, "update %d:\n", id)
		for _, e := range j.events[id] {
			fmt.Fprintf(out, "  %s\n", e)
		}
	}
	j.mu.Unlock()

	fmt.Fprintln(out, "\nstored rows:")
	for _, id := range []int64{1, 2, 3} {
		row, ok, err := store.Get(ctx, id)
		if err != nil || !ok {
			return fmt.Errorf("row %d missing: %v", id, err)
		}
		note := ""
		if row.State == intake.StateAbandoned {
			note = ", exhaustion acknowledged"
			if row.Unacknowledged() {
				note = ", exhaustion NOT acknowledged"
			}
		}
		fmt.Fprintf(out, "  update %d: %s after %d attempt(s)%s\n", id, row.State, row.Attempts, note)
	}

	// Check what happened against what should have.
	want := map[int64]struct {
		state    intake.State
		attempts int
	}{1: {intake.StateCompleted, 1}, 2: {intake.StateCompleted, 3}, 3: {intake.StateAbandoned, 3}}
	for id, w := range want {
		row, _, _ := store.Get(ctx, id)
		if row.State != w.state || row.Attempts != w.attempts || row.Unacknowledged() {
			problems = append(problems, fmt.Sprintf("update %d is %s after %d attempts (unacknowledged %v), want %s after %d",
				id, row.State, row.Attempts, row.Unacknowledged(), w.state, w.attempts))
		}
	}
	mu.Lock()
	if attempts[1] != 1 {
		problems = append(problems, fmt.Sprintf("update 1 handled %d times, want once", attempts[1]))
	}
	mu.Unlock()
	if exh.UpdateID != 3 || exh.Attempt != 3 {
		problems = append(problems, fmt.Sprintf("exhaustion of update %d attempt %d, want update 3 attempt 3", exh.UpdateID, exh.Attempt))
	}
	if _, ok, _ := store.Get(ctx, 4); ok {
		problems = append(problems, "the forged update 4 was recorded")
	}
	if len(problems) > 0 {
		return errors.New("unexpected:\n  " + strings.Join(problems, "\n  "))
	}
	fmt.Fprintln(out, "\nall as expected")
	return nil
}

func post(ctx context.Context, srv *httptest.Server, secret, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/telegram", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(intake.SecretHeader, secret)
	resp, err := srv.Client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
