package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// ManualClock is a clock a test moves by hand; functions due run, in
// order, inside Advance. It is exported for the package's external tests.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	async  bool
}

type manualTimer struct {
	at   time.Time
	f    func()
	done bool // fired or stopped
}

// NewManualClock is a ManualClock at 2026-12-03 12:00 UTC. With async, a
// function due at once (AfterFunc of d <= 0) runs on its own goroutine
// rather than inside AfterFunc, for callers that hold a lock AfterFunc's
// function takes.
func NewManualClock(async bool) *ManualClock {
	return &ManualClock{now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), async: async}
}

func newManualClock() *ManualClock { return NewManualClock(false) }

// Now is the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc runs f once the clock reached now+d; the function returned
// stops it, reporting whether it was still waiting.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	t := &manualTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	if d <= 0 {
		if c.async {
			go c.Advance(0)
		} else {
			c.Advance(0)
		}
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.done
		t.done = true
		return was
	}
}

// Advance moves the clock by d and runs the functions that fell due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*manualTimer
	for _, t := range c.timers {
		if !t.done && !t.at.After(c.now) {
			t.done = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// Armed reports how many timers wait.
func (c *ManualClock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// declineBench is a decliner in front of a real gateway, a memstore and
// telegramtest, all on one manual clock, with a user in a private chat.
type declineBench struct {
	clk      *ManualClock
	tg       *telegramtest.Server
	store    *memstore.Store
	gw       *gateway.Gateway
	d        *decliner
	user     telegramtest.User
	chat     telegramtest.Chat
	mu       sync.Mutex
	declines []Decline
}

func newDeclineBench(t *testing.T, cfg DeclineConfig) *declineBench {
	t.Helper()
	b := &declineBench{clk: newManualClock()}
	b.tg = telegramtest.NewServer(telegramtest.Config{NowFunc: b.clk.Now, Limits: telegramtest.Limits{Disabled: true}})
	t.Cleanup(b.tg.Close)
	b.user = b.tg.NewUser("Ann")
	var err error
	if b.chat, err = b.tg.NewPrivateChat(b.user); err != nil {
		t.Fatal(err)
	}
	b.store = memstore.New()
	base, err := transport.New(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.CloseIdleConnections)
	if b.gw, err = gateway.New(gateway.Config{Token: b.tg.Token, APIRoot: b.tg.URL, Store: b.store, OwnsIntake: true, Transport: base}); err != nil {
		t.Fatal(err)
	}
	cfg.Test = DeclineTestHooks{NowFunc: b.clk.Now, AfterFunc: b.clk.AfterFunc}
	c := Config{Decline: cfg}
	if err := c.fillDecline(); err != nil {
		t.Fatal(err)
	}
	emit := func(e Event) {
		if e.Kind == KindDeclined {
			b.mu.Lock()
			b.declines = append(b.declines, e.Decline)
			b.mu.Unlock()
		}
	}
	b.d = newDecliner(c.Decline, b.gw, slog.New(slog.NewTextHandler(io.Discard, nil)), emit)
	return b
}

// claim records the sandbox's update in the store and claims it.
func (b *declineBench) claim(t *testing.T, u telegramtest.Update) (intake.Update, intake.Attempt) {
	t.Helper()
	now := time.Now()
	if _, err := b.store.Add(t.Context(), intake.Incoming{UpdateID: u.ID, Body: u.JSON, ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := b.store.Claim(t.Context(), u.ID, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	return intake.Update{ID: u.ID, Body: u.JSON}, intake.Attempt{Identity: id}
}

// press has the bot send a button and the user press it.
func (b *declineBench) press(t *testing.T) telegramtest.Update {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"chat_id": b.chat.ID, "text": "Sure?",
		"reply_markup": map[string]any{"inline_keyboard": [][]map[string]string{{{"text": "Yes", "callback_data": "yes"}}}}})
	m := b.botCall(t, "sendMessage", body)
	u, err := b.tg.PressButton(b.chat, b.user, m, "yes")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// botCall makes a call of the bot's straight to telegramtest and returns
// the message id of its result.
func (b *declineBench) botCall(t *testing.T, method string, body []byte) int64 {
	t.Helper()
	resp, err := b.tg.Client().Post(b.tg.URL+"/bot"+b.tg.Token+"/"+method, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		OK     bool `json:"ok"`
		Result struct {
			MessageID int64 `json:"message_id"`
		} `json:"result"`
		Description string `json:"description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || !env.OK {
		t.Fatalf("%s = %+v, %v", method, env, err)
	}
	return env.Result.MessageID
}

// pay has the bot send an invoice and the user pay it.
func (b *declineBench) pay(t *testing.T) telegramtest.Update {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"chat_id": b.chat.ID, "title": "Coffee", "description": "A cup", "payload": "order-1",
		"currency": "XTR", "prices": []map[string]any{{"label": "Cup", "amount": 30}}})
	u, err := b.tg.Pay(b.chat, b.user, b.botCall(t, "sendInvoice", body))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (b *declineBench) made() []Decline {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Decline(nil), b.declines...)
}

// TestDeclineCallbackBeforeDeadline: a press the app does not answer gets
// an empty answer Margin before its deadline, not a moment earlier; the
// app's later answer is the decline, replayed; Telegram saw one answer.
func TestDeclineCallbackBeforeDeadline(t *testing.T) {
	t.Parallel()
	b := newDeclineBench(t, DeclineConfig{})
	press := b.press(t)
	upd, a := b.claim(t, press)
	stop := b.d.guard(t.Context(), upd, a)
	b.clk.Advance(DefaultCallbackQueryDeadline - DefaultDeclineMargin - time.Millisecond)
	if n := len(b.tg.CallbackAnswers()); n != 0 {
		t.Fatalf("%d answers before the decline time", n)
	}
	b.clk.Advance(time.Millisecond)
	got := b.tg.CallbackAnswers()
	if len(got) != 1 || got[0].Text != "" || got[0].QueryID != press.CallbackQueryID {
		t.Fatalf("answers at the decline time = %+v; want one empty answer", got)
	}
	if o, _ := b.tg.QueryOutcomeOf(press.CallbackQueryID); o.State != telegramtest.QueryAnswered {
		t.Errorf("query outcome = %+v", o)
	}
	// The app answers now, with words: the journal answers it.
	status, outcome, replayed := b.gw.Reply(t.Context(), a.Identity, "answerCallbackQuery", []byte(`{"callback_query_id":"`+press.CallbackQueryID+`","text":"Done!"}`))
	if status != 200 || outcome != string(wire.OutcomeAnswered) || !replayed {
		t.Errorf("the app's late answer = %d %s replayed=%v; want the decline's answer, replayed", status, outcome, replayed)
	}
	stop(true)
	if n := len(b.tg.CallbackAnswers()); n != 1 {
		t.Errorf("Telegram saw %d answers; want 1", n)
	}
	if d := b.made(); len(d) != 1 || d[0].Replayed || d[0].Kind != DeclineCallbackQuery || d[0].Identity != a.Identity {
		t.Errorf("declines = %+v", d)
	}
}

// TestDeclineStoppedInTime: an attempt that ends before the decline time
// disarms it: nothing is declined, ever.
func TestDeclineStoppedInTime(t *testing.T) {
	t.Parallel()
	b := newDeclineBench(t, DeclineConfig{})
	upd, a := b.claim(t, b.press(t))
	stop := b.d.guard(t.Context(), upd, a)
	b.clk.Advance(time.Second)
	stop(true)
	b.clk.Advance(time.Minute)
	if n, d := len(b.tg.CallbackAnswers()), b.made(); n != 0 || len(d) != 0 {
		t.Errorf("%d answers, declines %+v; want none", n, d)
	}
}

// TestDeclinePreCheckout: an unanswered pre-checkout query is declined
// ok:false with the configured message before the 10 s deadline: the
// payment fails, declined, and no successful_payment is sent. One the app
// answered ok first is not declined: the decline is replayed and the
// payment succeeds.
func TestDeclinePreCheckout(t *testing.T) {
	t.Parallel()
	t.Run("unanswered", func(t *testing.T) {
		t.Parallel()
		b := newDeclineBench(t, DeclineConfig{PreCheckoutQuery: DeclinePolicy{Text: "Shop closed"}, Margin: 3 * time.Second})
		upd, a := b.claim(t, b.pay(t))
		stop := b.d.guard(t.Context(), upd, a)
		defer stop(false)
		b.clk.Advance(7 * time.Second)
		p := b.tg.Payments()[0]
		if p.State != telegramtest.PaymentFailed || p.FailReason != telegramtest.PaymentDeclined || p.UserNotice != "Shop closed" || p.UpdateID != 0 {
			t.Errorf("payment = %+v; want failed, declined with the configured message", p)
		}
		status, _, replayed := b.gw.Reply(t.Context(), a.Identity, "answerPreCheckoutQuery", []byte(`{"pre_checkout_query_id":"`+p.QueryID+`","ok":true}`))
		if status != 200 || !replayed || b.tg.Payments()[0].State != telegramtest.PaymentFailed {
			t.Errorf("the app's late ok = %d replayed=%v, payment %+v", status, replayed, b.tg.Payments()[0])
		}
	})
	t.Run("answered first", func(t *testing.T) {
		t.Parallel()
		b := newDeclineBench(t, DeclineConfig{})
		pay := b.pay(t)
		upd, a := b.claim(t, pay)
		stop := b.d.guard(t.Context(), upd, a)
		defer stop(true)
		b.clk.Advance(5 * time.Second)
		if st, _, rp := b.gw.Reply(t.Context(), a.Identity, "answerPreCheckoutQuery", []byte(`{"pre_checkout_query_id":"`+pay.PreCheckoutQueryID+`","ok":true}`)); st != 200 || rp {
			t.Fatalf("the app's answer = %d replayed=%v", st, rp)
		}
		b.clk.Advance(5 * time.Second)
		if d := b.made(); len(d) != 1 || !d[0].Replayed || d[0].Status != 200 {
			t.Errorf("declines = %+v; want one, replayed", d)
		}
		if p := b.tg.Payments()[0]; p.State != telegramtest.PaymentSucceeded {
			t.Errorf("payment = %+v", p)
		}
	})
}

// TestDeclineTiming: the deadline counts from the update's first sighting,
// across attempts; a retry past the decline time declines at once, one
// past the deadline not at all; a disabled kind is never declined.
func TestDeclineTiming(t *testing.T) {
	t.Parallel()
	t.Run("retry past the decline time", func(t *testing.T) {
		t.Parallel()
		b := newDeclineBench(t, DeclineConfig{})
		upd, a := b.claim(t, b.press(t))
		stop := b.d.guard(t.Context(), upd, a)
		b.clk.Advance(time.Second)
		stop(false) // the first attempt failed early
		b.clk.Advance(13 * time.Second)
		if len(b.made()) != 0 {
			t.Fatal("declined while no attempt ran")
		}
		stop = b.d.guard(t.Context(), upd, a) // the retry, 14 s after the press
		defer stop(true)
		if d := b.made(); len(d) != 1 || len(b.tg.CallbackAnswers()) != 1 {
			t.Errorf("declines = %+v; want one, at once", d)
		}
	})
	t.Run("retry past the deadline", func(t *testing.T) {
		t.Parallel()
		b := newDeclineBench(t, DeclineConfig{})
		upd, a := b.claim(t, b.press(t))
		b.d.guard(t.Context(), upd, a)(false)
		b.clk.Advance(16 * time.Second)
		stop := b.d.guard(t.Context(), upd, a)
		b.clk.Advance(time.Minute)
		stop(true)
		if d := b.made(); len(d) != 0 {
			t.Errorf("declines = %+v; want none past the deadline", d)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		t.Parallel()
		b := newDeclineBench(t, DeclineConfig{CallbackQuery: DeclinePolicy{Disable: true}})
		upd, a := b.claim(t, b.press(t))
		stop := b.d.guard(t.Context(), upd, a)
		b.clk.Advance(time.Minute)
		stop(true)
		if d := b.made(); len(d) != 0 {
			t.Errorf("declines = %+v; want none", d)
		}
	})
}

// TestDeclineSeam: Decline, the seam a deadline scheduler calls, takes
// the attempt from ctx and refuses to act without one; a stale attempt's
// decline is refused by the gateway and sends nothing.
func TestDeclineSeam(t *testing.T) {
	t.Parallel()
	b := newDeclineBench(t, DeclineConfig{})
	upd, a := b.claim(t, b.press(t))
	if err := b.d.Decline(t.Context(), upd, DeclineCallbackQuery); !errors.Is(err, ErrNoAttempt) {
		t.Errorf("Decline outside an attempt = %v; want ErrNoAttempt", err)
	}
	stale := a.Identity
	stale.ClaimID = "someone-else"
	err := b.d.declineAs(context.Background(), stale, upd, DeclineCallbackQuery)
	var de *DeclineError
	if !errors.As(err, &de) || de.Outcome != string(wire.OutcomeStale) {
		t.Errorf("stale decline = %v; want a DeclineError, stale", err)
	}
	if err := b.d.declineAs(t.Context(), a.Identity, upd, DeclinePreCheckoutQuery); err != nil || len(b.made()) != 1 {
		t.Errorf("a decline of another kind = %v; want nothing done", err)
	}
	if n := len(b.tg.CallbackAnswers()); n != 0 {
		t.Errorf("Telegram saw %d answers; want 0", n)
	}
}

func TestDeclineConfig(t *testing.T) {
	t.Parallel()
	long := string(make([]rune, 201))
	for _, tc := range []struct {
		name  string
		cfg   DeclineConfig
		field string
	}{
		{"negative margin", DeclineConfig{Margin: -1}, "Decline.Margin"},
		{"margin beyond a deadline", DeclineConfig{Margin: 10 * time.Second}, "Decline.Margin"},
		{"long text", DeclineConfig{CallbackQuery: DeclinePolicy{Text: long}}, "Decline.CallbackQuery.Text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Decline: tc.cfg}
			var ce *ConfigError
			if err := c.fillDecline(); !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("fillDecline = %v; want a ConfigError on %s", err, tc.field)
			}
		})
	}
	c := Config{Decline: DeclineConfig{Margin: 10 * time.Second, PreCheckoutQuery: DeclinePolicy{Disable: true}, ShippingQuery: DeclinePolicy{Disable: true}}}
	if err := c.fillDecline(); err != nil {
		t.Errorf("a margin beyond only disabled kinds' deadlines: %v", err)
	}
	c = Config{}
	if err := c.fillDecline(); err != nil || c.Decline.Margin != DefaultDeclineMargin || c.Decline.PreCheckoutQuery.Text != DefaultPreCheckoutDeclineMessage ||
		c.Decline.CallbackQuery.deadline != DefaultCallbackQueryDeadline || c.Decline.CallbackQuery.Text != "" {
		t.Errorf("defaults = %+v, %v", c.Decline, err)
	}
}

// TestDeclineCountsFromReceipt: an update that waited 14 s since it was
// recorded (behind its chat, say) before its first attempt here is
// declined at once, not 13 s later.
func TestDeclineCountsFromReceipt(t *testing.T) {
	t.Parallel()
	b := newDeclineBench(t, DeclineConfig{})
	recorded := time.Now().Add(-14 * time.Second)
	b.d.receivedAt = func(context.Context, int64) (time.Time, bool) { return recorded, true }
	upd, a := b.claim(t, b.press(t))
	stop := b.d.guard(t.Context(), upd, a)
	defer stop(true)
	if d := b.made(); len(d) != 1 || len(b.tg.CallbackAnswers()) != 1 {
		t.Errorf("declines = %+v; want one, at once", d)
	}
}
