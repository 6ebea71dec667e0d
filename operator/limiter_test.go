package operator_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/operator"
	"github.com/tgrelay/tgrelay/throttle"
)

// The channel waits its turn in a limiter shared with the bot's other
// senders, and reports Telegram's 429 to it.
func TestSharedLimiter(t *testing.T) {
	srv := newBotServer(t, refusal(429, "Too Many Requests: retry after 3", `{"retry_after":3}`))
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []throttle.Event
		l, err := throttle.New(throttle.Config{
			Chat: throttle.Limit{Count: 1, Per: 10 * time.Second},
			Observer: throttle.Observer{EventFunc: func(e throttle.Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		client, clk := newClient(t, srv)
		const chat = -100500
		ch, d := newChannel(t, client, operator.Config{ChatID: chat, MinInterval: time.Second, Limiter: l})
		// Another sender of the bot just wrote to the operator chat.
		p, err := l.Wait(t.Context(), "sendMessage", chat)
		if err != nil {
			t.Fatal(err)
		}
		p.Done()
		start := time.Now()
		ch.Post("alert", "")
		drain(t, ch)
		clk.mu.Lock()
		first := clk.times[0].Sub(start)
		clk.mu.Unlock()
		if first != 10*time.Second {
			t.Errorf("first send after %v, want the chat's 10s limit", first)
		}
		// The refused send did not count against the chat's limit; the 429
		// paused the chat for its retry_after, and the retry went then.
		if g := clk.gaps(); len(g) != 1 || g[0] != 3*time.Second {
			t.Errorf("gaps %v, want one of 3s", g)
		}
		if len(d.All()) != 0 {
			t.Errorf("drops %v", d.Summary())
		}
		mu.Lock()
		defer mu.Unlock()
		var saw bool
		for _, e := range events {
			saw = saw || (e.Kind == throttle.EventTooManyRequests && e.ChatID == chat && e.RetryAfter == 3*time.Second)
		}
		if !saw {
			t.Errorf("the limiter never heard of the 429: %+v", events)
		}
	})
}
