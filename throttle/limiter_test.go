package throttle_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/throttle"
)

func newLimiter(t *testing.T, cfg throttle.Config) *throttle.Limiter {
	t.Helper()
	l, err := throttle.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// send waits for a turn and finishes the permit at once, as a call
// answered instantly would; it returns how long the wait took.
func send(t *testing.T, l *throttle.Limiter, chat int64) time.Duration {
	t.Helper()
	start := time.Now()
	p, err := l.Wait(t.Context(), "sendMessage", chat)
	if err != nil {
		t.Errorf("Wait(chat %d): %v", chat, err)
		return 0
	}
	p.Done()
	return time.Since(start)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   throttle.Config
		field string
	}{
		{"bot count zero with per", throttle.Config{Bot: throttle.Limit{Per: time.Second}}, "Bot.Count"},
		{"chat per zero", throttle.Config{Chat: throttle.Limit{Count: 1}}, "Chat.Per"},
		{"group per too long", throttle.Config{Group: throttle.Limit{Count: 1, Per: 25 * time.Hour}}, "Group.Per"},
		{"paid count too big", throttle.Config{Paid: throttle.Limit{Count: 1 << 21, Per: time.Second}}, "Paid.Count"},
		{"negative max wait", throttle.Config{MaxWait: -1}, "MaxWait"},
		{"max wait too long", throttle.Config{MaxWait: time.Hour}, "MaxWait"},
		{"negative queue", throttle.Config{MaxQueue: -1}, "MaxQueue"},
		{"negative hold", throttle.Config{MaxHold: -time.Second}, "MaxHold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := throttle.New(tc.cfg)
			if ce, ok := errors.AsType[*throttle.ConfigError](err); !ok || ce.Field != tc.field {
				t.Fatalf("New: %v, want a *ConfigError naming %s", err, tc.field)
			}
			if verr := tc.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Fatalf("Validate = %v, want New's %v", verr, err)
			}
		})
	}
	l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: -1}})
	c := l.Config()
	if c.Bot != (throttle.Limit{Count: 30, Per: time.Second}) || c.Group != (throttle.Limit{Count: 20, Per: time.Minute}) ||
		c.Chat.Count >= 0 || c.MaxWait != throttle.DefaultMaxWait || c.MaxQueue != throttle.DefaultMaxQueue {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestCounts(t *testing.T) {
	t.Parallel()
	for m, want := range map[string]bool{
		"sendMessage": true, "SENDMESSAGE": true, "copyMessage": true, "forwardMessages": true,
		"editMessageText": true, "sendPhoto": true, "sendMediaGroup": true, "stopPoll": true,
		"getMe": false, "getUpdates": false, "answerCallbackQuery": false, "sendChatAction": false,
		"deleteMessage": false, "setWebhook": false, "": false, strings.Repeat("a", 100): false,
	} {
		if got := throttle.Counts(m); got != want {
			t.Errorf("Counts(%q) = %v, want %v", m, got, want)
		}
	}
}

// An uncounted method passes at once, even while the bot is paused.
func TestUncountedPassesAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Bot: throttle.Limit{Count: 1, Per: time.Hour}})
		send(t, l, 1)
		start := time.Now()
		for range 100 {
			p, err := l.Wait(t.Context(), "getMe", 0)
			if err != nil {
				t.Fatal(err)
			}
			p.Done()
			p, err = l.Wait(t.Context(), "answerCallbackQuery", 1)
			if err != nil {
				t.Fatal(err)
			}
			p.Done()
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("uncounted calls waited %v", d)
		}
	})
}

// The limits themselves: a chat gets its burst, then its window; a group
// its 20 per minute; the bot its 30 per second, spaced evenly.
func TestLimits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{MaxWait: 2 * time.Minute})
		iv := time.Second / 30 // the bot-wide spacing
		start := time.Now()
		c, p := throttle.DefaultChatCount, throttle.DefaultChatPer // 5 per 5 s
		var at []time.Duration
		for range c + 2 {
			send(t, l, 7)
			at = append(at, time.Since(start))
		}
		// The bot-wide spacing tolerates one interval: a burst's first two
		// go together, then one per interval; the two after the burst wait
		// for the chat's window.
		want := []time.Duration{0, 0, iv, 2 * iv, 3 * iv, p, p}
		if !equalDurations(at, want) {
			t.Errorf("private chat sends at %v, want %v", at, want)
		}

		time.Sleep(time.Minute)
		start = time.Now()
		at = at[:0]
		for range 22 {
			send(t, l, -100)
			at = append(at, time.Since(start))
		}
		// Bursts of 5 per 5 s (the chat limit) until 20 in the minute; the
		// 21st when the first leaves the minute.
		for i := range 20 {
			if want := time.Duration(i/c)*p + time.Duration(max(0, i%c-1))*iv; at[i] != want {
				t.Errorf("group send %d at %v, want %v", i, at[i], want)
			}
		}
		if at[20] != time.Minute || at[21] != time.Minute {
			t.Errorf("group sends 21 and 22 at %v, %v; want 1m", at[20], at[21])
		}

		time.Sleep(time.Minute)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var last time.Duration
		for i := range 61 {
			wg.Go(func() {
				d := send(t, l, int64(1000+i))
				mu.Lock()
				last = max(last, d)
				mu.Unlock()
			})
		}
		wg.Wait()
		if last != 2*time.Second {
			t.Errorf("61 chats at 30/s: last went after %v, want 2s", last)
		}
	})
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A quiet chat's reply is not held behind chats that flood: with the
// bot-wide budget exhausted by 40 private chats and a group sending as
// fast as they may, the quiet chat waits at most its own interval.
func TestFairAcrossChats(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{})
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var floodWaits []time.Duration
		for i := range 41 {
			chat := int64(2000 + i)
			if i == 40 {
				chat = -2000
			}
			wg.Go(func() {
				for ctx.Err() == nil {
					start := time.Now()
					p, err := l.Wait(ctx, "sendMessage", chat)
					if err != nil {
						return
					}
					mu.Lock()
					floodWaits = append(floodWaits, time.Since(start))
					mu.Unlock()
					p.Done()
				}
			})
		}
		time.Sleep(10 * time.Second) // the flood is in its steady state
		var worst time.Duration
		for range 20 {
			worst = max(worst, send(t, l, 42))
			time.Sleep(1500 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		if worst > time.Second {
			t.Errorf("quiet chat waited up to %v, want at most its own interval (1s)", worst)
		}
		var floodWorst time.Duration
		for _, d := range floodWaits {
			floodWorst = max(floodWorst, d)
		}
		if floodWorst <= time.Second {
			t.Errorf("the flood never waited more than %v: the bot-wide limit was not exhausted", floodWorst)
		}
		t.Logf("quiet chat worst wait %v; flood worst wait %v over %d sends", worst, floodWorst, len(floodWaits))
	})
}

// Calls to one chat are granted in the order they asked, one at a time.
func TestOrderWithinChat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{})
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		first, err := l.Wait(t.Context(), "sendMessage", 5)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			wg.Go(func() {
				p, err := l.Wait(t.Context(), "sendMessage", 5)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				p.Done()
			})
			synctest.Wait() // i is queued before i+1 asks
		}
		if len(order) != 0 {
			t.Fatalf("granted %v while the chat's first call was in flight", order)
		}
		first.Done()
		wg.Wait()
		for i, v := range order {
			if v != i {
				t.Fatalf("grant order %v, want 0..9", order)
			}
		}
	})
}

// A 429 pauses the chat for retry_after; the retried call goes first when
// the pause ends ("at the head of its chat's queue"), before a call that
// queued behind it, which waits until the retried call is finished.
func TestRetryPausesAndKeepsOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var events []throttle.Event
		var mu sync.Mutex
		l := newLimiter(t, throttle.Config{Observer: throttle.Observer{EventFunc: func(e throttle.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}})
		start := time.Now()
		a, err := l.Wait(t.Context(), "sendMessage", 9)
		if err != nil {
			t.Fatal(err)
		}
		var bAt atomic.Int64 // since start, once granted
		done := make(chan struct{})
		go func() {
			defer close(done)
			b, err := l.Wait(t.Context(), "sendMessage", 9)
			if err != nil {
				t.Error(err)
				return
			}
			bAt.Store(int64(time.Since(start)))
			b.Done()
		}()
		synctest.Wait()
		if err := a.Retry(t.Context(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("retry granted after %v, want the 5s pause", d)
		}
		other := send(t, l, 10) // another chat is not paused by one chat's 429
		if other > time.Second/30 {
			t.Errorf("another chat waited %v", other)
		}
		time.Sleep(3 * time.Second) // the retried call in flight
		if at := bAt.Load(); at != 0 {
			t.Fatalf("the call queued behind went at %v, while the retried one was in flight", time.Duration(at))
		}
		a.Done()
		<-done
		if at := time.Duration(bAt.Load()); at < 8*time.Second {
			t.Fatalf("the call queued behind went at %v, before the retried one was finished (8s)", at)
		}
		mu.Lock()
		defer mu.Unlock()
		var saw bool
		for _, e := range events {
			if e.Kind == throttle.EventTooManyRequests && e.ChatID == 9 && e.RetryAfter == 5*time.Second && e.Scope == throttle.ScopeChat {
				saw = true
			}
		}
		if !saw {
			t.Fatalf("no too-many-requests event for chat 9 in %+v", events)
		}
	})
}

// Two chats refused while a pause runs mean the bot's limit: the whole bot
// pauses.
func TestSecondChat429PausesBot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{})
		a, _ := l.Wait(t.Context(), "sendMessage", 1)
		b, _ := l.Wait(t.Context(), "sendMessage", 2)
		if s := a.Limited(4 * time.Second); s != throttle.ScopeChat {
			t.Fatalf("first 429 paused %q, want chat", s)
		}
		if s := b.Limited(4 * time.Second); s != throttle.ScopeBot {
			t.Fatalf("second chat's 429 paused %q, want bot", s)
		}
		if d := send(t, l, 3); d != 4*time.Second {
			t.Fatalf("a third chat waited %v, want the bot's 4s pause", d)
		}
	})
}

func TestMaxWaitRefuses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var refused []throttle.Event
		// The bot-wide limit is full: the answered sends of the call's
		// own chat do not show that it cannot go in time, so it waits.
		l := newLimiter(t, throttle.Config{
			Bot:      throttle.Limit{Count: 1, Per: 10 * time.Second},
			MaxWait:  3 * time.Second,
			Observer: throttle.Observer{EventFunc: func(e throttle.Event) { refused = append(refused, e) }},
		})
		send(t, l, 1)
		start := time.Now()
		_, err := l.Wait(t.Context(), "sendMessage", 4)
		var werr *throttle.WaitError
		if !errors.As(err, &werr) || !errors.Is(err, throttle.ErrThrottled) {
			t.Fatalf("Wait: %v, want a *WaitError", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("refused after %v, want MaxWait (3s)", d)
		}
		if werr.Reason != throttle.ReasonMaxWait || werr.RetryAfter != 7*time.Second || werr.ChatID != 4 {
			t.Errorf("WaitError %+v, want max-wait, retry after 7s, chat 4", werr)
		}
		// The refused call left no trace: the next call goes when the
		// chat's limit allows, as if it had never asked.
		time.Sleep(7 * time.Second)
		if d := send(t, l, 4); d != 0 {
			t.Errorf("after the window, a call waited %v", d)
		}
		if n := l.Stats().Waiting; n != 0 {
			t.Errorf("%d calls still waiting", n)
		}
		if refused[len(refused)-2].Kind != throttle.EventRefused {
			t.Errorf("events %+v: no refusal", refused)
		}
	})
}

func TestPauseBeyondMaxWaitRefusesAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{MaxWait: 5 * time.Second})
		p, _ := l.Wait(t.Context(), "sendMessage", 8)
		p.Limited(30 * time.Second)
		start := time.Now()
		_, err := l.Wait(t.Context(), "sendMessage", 8)
		var werr *throttle.WaitError
		if !errors.As(err, &werr) || werr.Reason != throttle.ReasonPaused || werr.RetryAfter != 30*time.Second {
			t.Fatalf("Wait: %v, want paused, retry after 30s", err)
		}
		if time.Since(start) != 0 {
			t.Fatal("waited before refusing")
		}
		// A pause within MaxWait is waited out.
		time.Sleep(27 * time.Second)
		if d := send(t, l, 8); d != 3*time.Second {
			t.Fatalf("waited %v, want the 3s left of the pause", d)
		}
	})
}

func TestQueueBound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{MaxQueue: 3, Bot: throttle.Limit{Count: 1, Per: time.Second}})
		send(t, l, 1)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				if _, err := l.Wait(ctx, "sendMessage", int64(10+i)); err == nil {
					t.Error("a queued call was granted while the bot limit was spent")
				}
			})
		}
		synctest.Wait()
		_, err := l.Wait(t.Context(), "sendMessage", 20)
		var werr *throttle.WaitError
		if !errors.As(err, &werr) || werr.Reason != throttle.ReasonQueueFull {
			t.Fatalf("fourth Wait: %v, want queue-full", err)
		}
		cancel()
		wg.Wait()
		if n := l.Stats().Waiting; n != 0 {
			t.Fatalf("%d still waiting after cancel", n)
		}
	})
}

func TestContextEndsWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Minute}})
		send(t, l, 3)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := l.Wait(ctx, "sendMessage", 3)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait: %v, want the context's deadline", err)
		}
		if l.Stats().Waiting != 0 {
			t.Fatal("the abandoned call still waits")
		}
	})
}

// A permit never finished stops blocking its chat after MaxHold, and
// counts as sent from then ("A permit never finished counts as sent
// Config.MaxHold after its grant"): in its chat's window from that moment.
func TestMaxHold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		chat throttle.Limit
		want time.Duration
	}{
		{"default chat limit", throttle.Limit{}, 10 * time.Second},
		{"one a minute", throttle.Limit{Count: 1, Per: time.Minute}, 70 * time.Second}, // MaxHold, then the chat's minute
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, throttle.Config{Chat: tc.chat, MaxHold: 10 * time.Second, MaxWait: 2 * time.Minute})
				if _, err := l.Wait(t.Context(), "sendMessage", 6); err != nil { // never finished
					t.Fatal(err)
				}
				if d := send(t, l, 6); d != tc.want {
					t.Fatalf("next call waited %v, want %v", d, tc.want)
				}
			})
		})
	}
}

// A cancelled permit does not count; a done one does.
func TestCancelDoesNotCount(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Minute}, MaxWait: 2 * time.Minute})
		p, _ := l.Wait(t.Context(), "sendMessage", 2)
		p.Cancel()
		p.Done() // finishing twice does nothing
		if d := send(t, l, 2); d != 0 {
			t.Fatalf("after a cancelled call the next waited %v", d)
		}
		start := time.Now()
		p, _ = l.Wait(t.Context(), "sendMessage", 2)
		p.Done()
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("after a sent call the next waited %v, want 1m", d)
		}
	})
}

// Paid broadcasts count against their own, higher limit.
func TestPaidBroadcastLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Bot: throttle.Limit{Count: 2, Per: time.Second}, Paid: throttle.Limit{Count: 100, Per: time.Second}})
		start := time.Now()
		for i := range 100 {
			p, err := l.WaitPaid(t.Context(), "sendMessage", int64(100+i))
			if err != nil {
				t.Fatal(err)
			}
			p.Done()
		}
		if d, want := time.Since(start), 98*(time.Second/100); d != want {
			t.Fatalf("100 paid sends took %v, want %v (100/s, not the bot's 2/s)", d, want)
		}
		start = time.Now()
		for i := range 3 {
			send(t, l, int64(i+1))
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("three unpaid sends took %v, want 1s (2/s)", d)
		}
	})
}

// Config.Clock drives the limiter without testing/synctest.
func TestClockHook(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Minute}, MaxWait: 2 * time.Minute, Clock: clk})
	p, err := l.Wait(t.Context(), "sendMessage", 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Done()
	got := make(chan error, 1)
	go func() {
		p, err := l.Wait(t.Context(), "sendMessage", 1)
		if err == nil {
			p.Done()
		}
		got <- err
	}()
	clk.waitTimers(t, 2) // the limiter's wake-up and the call's MaxWait
	clk.advance(59 * time.Second)
	select {
	case err := <-got:
		t.Fatalf("granted before the minute: %v", err)
	default:
	}
	clk.advance(time.Second)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not granted after the fake minute")
	}
}

// fakeClock is a manual Clock.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	added  chan struct{}
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), added: make(chan struct{}, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) throttle.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.added <- struct{}{}
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// waitTimers waits until n timers were created (bounded).
func (c *fakeClock) waitTimers(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-c.added:
		case <-time.After(10 * time.Second):
			t.Fatal("the limiter set no timer")
		}
	}
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(c.now) {
			t.stopped = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// TestRefusedAtOnce: a call whose group cannot have room before its wait
// ends, by the sends answered already, is refused at once with the time
// until its turn, not after waiting; one whose turn comes within its wait
// is let through; a send still in flight is not counted for the refusal
// (it may yet be refused by Telegram and free its slot).
func TestRefusedAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const group = -100
		l := newLimiter(t, throttle.Config{
			Chat:    throttle.Limit{Count: -1},
			MaxWait: 10 * time.Second,
		})
		for range 20 { // the group's 20 in the first seconds of its minute
			send(t, l, group)
			time.Sleep(time.Second)
		}
		start := time.Now() // 20 s into the minute: the 21st's turn is 40 s away
		_, err := l.Wait(t.Context(), "sendMessage", group)
		var werr *throttle.WaitError
		if !errors.As(err, &werr) {
			t.Fatalf("Wait: %v, want a *WaitError", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("refused after %v, want at once", d)
		}
		if werr.Reason != throttle.ReasonMaxWait || werr.RetryAfter != 40*time.Second {
			t.Errorf("WaitError %+v, want max-wait, retry after 40s (its turn)", werr)
		}

		// With a deadline set for the call, the same holds for it.
		time.Sleep(35 * time.Second) // the turn is 5 s away, within MaxWait
		ctx := throttle.WithWaitDeadline(t.Context(), time.Now().Add(2*time.Second))
		if _, err := l.Wait(ctx, "sendMessage", group); !errors.As(err, &werr) || werr.RetryAfter != 5*time.Second {
			t.Fatalf("Wait with 2s left: %v, want refused at once, retry after 5s", err)
		}
		if d := send(t, l, group); d != 5*time.Second {
			t.Errorf("without the deadline the call waited %v, want its turn in 5s", d)
		}

		// A send in flight does not count for the refusal: the call waits.
		l2 := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Minute}, MaxWait: 10 * time.Second})
		p, err := l2.Wait(t.Context(), "sendMessage", 7)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(4 * time.Second)
			p.Limited(time.Second) // Telegram's 429: the slot is free again
		}()
		start = time.Now()
		if d := send(t, l2, 7); d != 5*time.Second {
			t.Errorf("behind a send in flight, refused by Telegram after 4s, the call waited %v, want 5s (the 429's pause)", d)
		}
		if time.Since(start) == 0 {
			t.Error("the call was refused at once")
		}
	})
}
