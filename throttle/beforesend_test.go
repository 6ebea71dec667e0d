package throttle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
)

// waitQueued returns once n calls wait in l.
func waitQueued(t *testing.T, l *throttle.Limiter, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d calls waiting", n), func() bool { return l.Stats().Waiting == n })
}

// TestTransportBeforeSend: the WithBeforeSend function runs only once the
// call has its turn, before it goes to Base; when it refuses, nothing goes
// to Base, the error says not dispatched and wraps the refusal, and the
// permit is cancelled (the chat's next call goes at once). A call that
// does not count runs it too, at once.
func TestTransportBeforeSend(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := throttle.New(throttle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	tr := throttle.NewTransport(l, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	}))
	call := func(ctx context.Context, method string) (*http.Response, error) {
		body, _ := json.Marshal(map[string]any{"chat_id": chat.ID, "text": "hi"})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.URL+"/bot"+tg.Token+"/"+method, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		return resp, err
	}

	// The chat's turn is held: the call waits, and its function waits too.
	held, err := l.Wait(t.Context(), "sendMessage", chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	errc := make(chan error, 1)
	go func() {
		_, err := call(throttle.WithBeforeSend(t.Context(), func() error {
			if sent.Load() != 0 {
				t.Error("the function ran after the call went to Base")
			}
			ran.Add(1)
			return nil
		}), "sendMessage")
		errc <- err
	}()
	waitQueued(t, l, 1)
	if ran.Load() != 0 {
		t.Fatal("the function ran while the call waited for its turn")
	}
	held.Cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 1 || sent.Load() != 1 || len(tg.MessagesTo(chat.ID)) != 1 {
		t.Fatalf("ran %d, sent %d, ledger %d; want 1 each", ran.Load(), sent.Load(), len(tg.MessagesTo(chat.ID)))
	}

	refusal := errors.New("the lease is gone")
	for _, method := range []string{"sendMessage", "sendChatAction"} { // counted, and not
		_, err := call(throttle.WithBeforeSend(t.Context(), func() error { return refusal }), method)
		var bse *throttle.BeforeSendError
		var nd interface{ NotDispatched() bool }
		if !errors.As(err, &bse) || bse.Method != method || !errors.Is(err, refusal) || !errors.As(err, &nd) || !nd.NotDispatched() {
			t.Fatalf("%s refused: %v; want a *BeforeSendError wrapping the refusal, not dispatched", method, err)
		}
	}
	if sent.Load() != 1 {
		t.Fatalf("Base got %d calls; want the refused ones never sent", sent.Load())
	}
	if s := l.Stats(); s.Held != 0 {
		t.Fatalf("stats %+v after a refusal; want the permit cancelled", s)
	}
}

// TestTransportBeforeSendOn429Retry: after Telegram's 429 the function
// runs again before the resend, once the retry has its turn; when it
// refuses then, the resend does not go (Telegram acted on nothing), the
// error says not dispatched, and the permit is cancelled.
func TestTransportBeforeSendOn429Retry(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 1}); err != nil {
		t.Fatal(err)
	}
	l, err := throttle.New(throttle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	tr := throttle.NewTransport(l, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	}))
	gone := errors.New("the app has gone")
	runs := 0
	ctx := throttle.WithBeforeSend(t.Context(), func() error {
		runs++
		if runs > 1 {
			return gone
		}
		return nil
	})
	body, _ := json.Marshal(map[string]any{"chat_id": chat.ID, "text": "hi"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.URL+"/bot"+tg.Token+"/sendMessage", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	var bse *throttle.BeforeSendError
	if !errors.As(err, &bse) || !errors.Is(err, gone) {
		t.Fatalf("RoundTrip: %v; want the retry refused before it was sent", err)
	}
	if runs != 2 || sent.Load() != 1 || len(tg.MessagesTo(chat.ID)) != 0 {
		t.Fatalf("ran %d, sent %d, ledger %d; want 2 runs, 1 send (the 429), no message", runs, sent.Load(), len(tg.MessagesTo(chat.ID)))
	}
	if s := l.Stats(); s.Held != 0 {
		t.Fatalf("stats %+v after the refusal; want the permit cancelled", s)
	}
}
