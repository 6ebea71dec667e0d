package broadcast

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
)

// A broadcast and another sender of the same bot (an app's replies through
// throttle's transport) share one limiter: the broadcast asks for far more
// than the bot-wide limit (Rate 500/s against Telegram's 20/s here), yet
// together they stay within it and Telegram refuses nothing.
func TestBroadcastSharesLimiter(t *testing.T) {
	t.Parallel()
	limits := telegramtest.Limits{Bot: telegramtest.Limit{Count: 20, Per: time.Second}}
	srv, _, chats := fakeTelegram(t, telegramtest.Config{Limits: limits}, 40)
	var refused atomic.Int64
	l, err := throttle.New(throttle.Config{
		Bot:  throttle.Limit{Count: 20, Per: time.Second},
		Chat: throttle.Limit{Count: 1, Per: time.Second},
		Observer: throttle.Observer{EventFunc: func(e throttle.Event) {
			if e.Kind == throttle.EventTooManyRequests {
				refused.Add(1)
			}
		}},
	})
	must(t, err)
	client := &http.Client{Transport: throttle.NewTransport(l, srv.Client().Transport)}
	c, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: client})
	must(t, err)

	var wg sync.WaitGroup
	wg.Go(func() { // the app: one reply to each of the last 10 chats
		for _, id := range chats[30:] {
			if _, err := c.Call(t.Context(), "sendMessage", map[string]any{"chat_id": id, "text": "reply"}); err != nil {
				t.Errorf("app reply to %d: %v", id, err)
			}
		}
	})
	direct, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: srv.Client()})
	must(t, err)
	cfg := Config{
		Name: "shared", Dir: t.TempDir(), Rate: 500, Concurrency: 16, Limiter: l,
		AudienceFunc: func(context.Context) ([]Recipient, error) { return ids(chats[:30]...), nil },
		SendFunc:     textSender(t, direct, "news"),
	}
	rep := run(t, cfg)
	wg.Wait()
	wantCounts(t, rep, StateFinished, 30, 0, 0, 0, 0)
	if n := refused.Load(); n != 0 {
		t.Fatalf("Telegram answered 429 %d times: the senders did not share the budget", n)
	}
	if n := len(srv.Messages()); n != 40 {
		t.Fatalf("Telegram accepted %d messages, want 40", n)
	}
}
