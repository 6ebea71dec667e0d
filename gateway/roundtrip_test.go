package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
)

// TestRoundTripperInProcess: a Go client using the gateway's RoundTripper
// gets the same fencing and replay from its context's identity.
func TestRoundTripperInProcess(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	bot, err := botapi.New(f.tg.Token, botapi.Config{APIRoot: f.tg.URL, HTTPClient: &http.Client{Transport: f.gw.RoundTripper()}})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]any{"chat_id": f.chat.ID, "text": "in process"}
	if _, err := bot.Call(t.Context(), "sendMessage", params); err != nil {
		t.Fatalf("a call without identity: %v", err)
	}
	first := f.claim(t, 5)
	ctx := gateway.WithIdentity(t.Context(), first)
	res1, err := bot.Call(ctx, "sendMessage", params)
	if err != nil {
		t.Fatal(err)
	}
	f.fail(t, first)
	res2, err := bot.Call(ctx, "sendMessage", params)
	var apiErr *botapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusConflict {
		t.Fatalf("a stale attempt's in-process call = %v, %v; want a 409 APIError", res2, err)
	}
	second := f.reclaim(t, 5)
	res3, err := bot.Call(gateway.WithIdentity(t.Context(), second), "sendMessage", params)
	if err != nil || string(res3) != string(res1) {
		t.Fatalf("attempt 2's identical call = %s, %v; want attempt 1's result %s", res3, err, res1)
	}
	if n := f.ledger("in process"); n != 2 {
		t.Errorf("ledger holds %d; want 2 (one unfenced, one of attempt 1)", n)
	}
}

// TestRoundTripperUnderRunner: a handler the intake runner calls needs no
// WithIdentity: the attempt in its context fences and journals its calls.
func TestRoundTripperUnderRunner(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	bot, err := botapi.New(f.tg.Token, botapi.Config{APIRoot: f.tg.URL, HTTPClient: &http.Client{Transport: f.gw.RoundTripper()}})
	if err != nil {
		t.Fatal(err)
	}
	store := f.store
	var runs atomic.Int32
	done := make(chan struct{})
	r, err := intake.New(intake.Config{
		Store: store,
		AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
			if _, err := bot.Call(ctx, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "from handler"}); err != nil {
				return err
			}
			if runs.Add(1) == 1 {
				return errors.New("fails after sending")
			}
			close(done)
			return nil
		},
		RetryFunc: func(error, int) (time.Duration, bool) { return time.Millisecond, true },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if _, err := r.Accept(t.Context(), []byte(`{"update_id":11,"message":{"chat":{"id":1}}}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the retry never completed")
	}
	if n := f.ledger("from handler"); n != 1 {
		t.Errorf("ledger holds %d; want 1: the retry's send is replayed", n)
	}
}

// TestRoundTripperLeaseLostWhileWaiting: an in-process call waits for its
// chat's turn while its attempt loses the lease; at its turn it is refused
// 409 and not sent, and nothing is journaled for it.
func TestRoundTripperLeaseLostWhileWaiting(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	bot, err := botapi.New(f.tg.Token, botapi.Config{APIRoot: f.tg.URL, HTTPClient: &http.Client{Transport: f.gw.RoundTripper()}})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]any{"chat_id": f.chat.ID, "text": "late"}
	first := f.claim(t, 6)
	held := holdTurn(t, f.lim, f.chat.ID)
	errc := make(chan error, 1)
	go func() {
		_, err := bot.Call(gateway.WithIdentity(t.Context(), first), "sendMessage", params)
		errc <- err
	}()
	waitQueued(t, f.lim, 1)
	f.fail(t, first)
	held.Cancel()
	var apiErr *botapi.APIError
	if err := <-errc; !errors.As(err, &apiErr) || apiErr.Code != http.StatusConflict {
		t.Fatalf("the call at its turn = %v; want a 409 APIError", err)
	}
	if n := f.ledger("late"); n != 0 {
		t.Fatalf("ledger holds %d; want nothing sent", n)
	}
	if es, _ := f.store.Journal(t.Context(), 6); len(es) != 0 {
		t.Fatalf("journal %+v; want nothing recorded for a refused call", es)
	}
	second := f.reclaim(t, 6)
	if _, err := bot.Call(gateway.WithIdentity(t.Context(), second), "sendMessage", params); err != nil {
		t.Fatal(err)
	}
	if n := f.ledger("late"); n != 1 {
		t.Fatalf("ledger holds %d; want the next attempt's call sent once", n)
	}
}
