package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// TestWebhookReplies: an app answers its update with webhook replies (an
// array, our extension); the relay performs them in order through the
// gateway. A throttled call fails the attempt, and the retry replays the
// call already performed: each message reaches the chat once.
func TestWebhookReplies(t *testing.T) {
	f := newFixture(t, fixtureOpts{maxWait: time.Second})
	var (
		forwards atomic.Int32
		roots    sync.Map
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwards.Add(1)
		roots.Store(r.Header.Get(wire.HeaderAPIRoot), true)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"method":"sendMessage","chat_id":%d,"text":"one"},{"method":"sendMessage","chat_id":%d,"text":"two"}]`, f.chat.ID, f.chat.ID)
	}))
	t.Cleanup(app.Close)
	var (
		mu      sync.Mutex
		replies []forward.Reply
	)
	fw, err := forward.New(forward.Config{URL: app.URL, Replier: f.gw, APIRoot: f.srv.URL,
		ReplyFunc: func(r forward.Reply) { mu.Lock(); replies = append(replies, r); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	// The second call of the first attempt meets Telegram's 429 with a
	// retry_after beyond the limiter's wait (1s): nothing sent, the update
	// is tried again after the pause.
	if err := f.tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, Nth: 2, RetryAfter: 2}); err != nil {
		t.Fatal(err)
	}
	done := make(chan intake.Identity, 1)
	r, err := intake.New(intake.Config{Store: f.store, AttemptHandler: fw.Handle,
		RetryFunc: func(error, int) (time.Duration, bool) { return 2 * time.Second, true },
		Observer: intake.Observer{SettleFunc: func(id intake.Identity, s intake.State) {
			if s == intake.StateCompleted {
				done <- id
			}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if _, err := r.Accept(t.Context(), []byte(`{"update_id":21,"message":{"chat":{"id":1}}}`)); err != nil {
		t.Fatal(err)
	}
	var id intake.Identity
	select {
	case id = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the update never completed")
	}
	if id.Attempt != 2 || forwards.Load() != 2 {
		t.Errorf("completed by attempt %d after %d forwards; want attempt 2 after 2", id.Attempt, forwards.Load())
	}
	if f.ledger("one") != 1 || f.ledger("two") != 1 {
		t.Errorf("ledger %v; want one and two once each", f.tg.MessagesTo(f.chat.ID))
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"answered/false", "answered/false", "answered/true", "answered/false"}
	var got []string
	for _, rp := range replies {
		got = append(got, fmt.Sprintf("%s/%v", rp.Outcome, rp.Replayed))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || replies[1].Status != 429 {
		t.Errorf("replies %+v; want %v with the second answered 429", replies, want)
	}
	n := 0
	roots.Range(func(k, _ any) bool { n++; return k.(string) != "" })
	if n != 2 {
		t.Errorf("%d distinct per-attempt roots announced; want 2", n)
	}
}
