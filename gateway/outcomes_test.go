package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// gate blocks outcome writes until released: the first n writes (n < 0:
// all) wait in BeforeOutcome; entered receives once per blocked write.
type gate struct {
	n       int64
	seen    atomic.Int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(t *testing.T, n int64) *gate {
	g := &gate{n: n, entered: make(chan struct{}, 100), release: make(chan struct{})}
	t.Cleanup(g.open) // never leave a write blocked behind the test
	return g
}

func (g *gate) hook(string) {
	if g.n >= 0 && g.seen.Add(1) > g.n {
		return
	}
	g.entered <- struct{}{}
	<-g.release
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// outcomes lists the journaled outcomes of the update's calls.
func (f *fixture) outcomes(t *testing.T, updateID int64) []intake.CallOutcome {
	t.Helper()
	es, err := f.store.Journal(t.Context(), updateID)
	if err != nil {
		t.Fatal(err)
	}
	var out []intake.CallOutcome
	for _, e := range es {
		out = append(out, e.Outcome)
	}
	return out
}

// TestOutcomeAfterAnswer: the app gets Telegram's answer while the outcome
// is still being journaled (the entry is pending meanwhile); once written,
// a later attempt's identical call is replayed.
func TestOutcomeAfterAnswer(t *testing.T) {
	g := newGate(t, -1)
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.Test.BeforeOutcome = g.hook }})
	id := f.claim(t, 1)
	r := f.send(t, &id, "hi")
	if r.status != 200 {
		t.Fatalf("send = %d %s", r.status, r.body)
	}
	<-g.entered
	if got := f.outcomes(t, 1); len(got) != 1 || got[0] != intake.CallPending {
		t.Fatalf("journal while the outcome is held back = %v; want one pending entry", got)
	}
	g.open()
	if err := f.gw.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.outcomes(t, 1); len(got) != 1 || got[0] != intake.CallAnswered {
		t.Fatalf("journal after Close = %v; want one answered entry", got)
	}
}

// TestLaterAttemptWaitsForOutcome: a later attempt's identical call that
// arrives while the earlier attempt's outcome is being written waits for
// it and is replayed with the recorded answer, not answered unknown from
// the pending intent.
func TestLaterAttemptWaitsForOutcome(t *testing.T) {
	g := newGate(t, 1)
	waiting := make(chan struct{}, 1)
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
		c.Test.BeforeOutcome = g.hook
		c.Test.OutcomeWait = func(string) { waiting <- struct{}{} }
	}})
	first := f.claim(t, 2)
	a1 := f.send(t, &first, "reply")
	if a1.status != 200 {
		t.Fatalf("attempt 1 = %d %s", a1.status, a1.body)
	}
	<-g.entered // attempt 1's outcome is held back
	f.fail(t, first)
	second := f.reclaim(t, 2)
	got := make(chan reply, 1)
	go func() { got <- f.send(t, &second, "reply") }()
	select {
	case <-waiting: // attempt 2's call waits for the outcome
	case r := <-got:
		t.Fatalf("attempt 2's identical call was answered (%d %s) without waiting for attempt 1's outcome", r.status, r.body)
	}
	g.open()
	r := <-got
	if r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "true" || !bytes.Equal(r.body, a1.body) {
		t.Errorf("attempt 2's identical call = %d %s (replayed %q, outcome %q); want attempt 1's answer replayed",
			r.status, r.body, r.header.Get(gateway.HeaderReplayed), r.header.Get(wire.HeaderOutcome))
	}
	if n := f.ledger("reply"); n != 1 {
		t.Errorf("the chat got %d messages; want 1", n)
	}
}

// callInFlight is an update whose first attempt's sendMessage "reply" is
// held after its intent was recorded, before it is sent, and whose second
// attempt holds the lease: the set-up of the tests of calls in flight.
type callInFlight struct {
	f       *fixture
	held    *gate
	waiting chan struct{} // receives when a call waits for the held one
	first   chan reply    // the first attempt's answer, once held is opened
	second  intake.Identity
}

func newCallInFlight(t *testing.T, updateID int64) *callInFlight {
	c := &callInFlight{held: newGate(t, 1), waiting: make(chan struct{}, 1), first: make(chan reply, 1)}
	c.f = newFixture(t, fixtureOpts{cfg: func(cfg *gateway.Config) {
		cfg.Test.AfterIntent = c.held.hook
		cfg.Test.OutcomeWait = func(string) { c.waiting <- struct{}{} }
	}})
	first := c.f.claim(t, updateID)
	go func() { c.first <- c.f.send(t, &first, "reply") }()
	<-c.held.entered // recorded, not yet sent
	c.f.fail(t, first)
	c.second = c.f.reclaim(t, updateID)
	return c
}

// TestLaterAttemptWaitsForCallAtTelegram: a later attempt's identical call
// that arrives while the earlier attempt's call is still on its way to
// Telegram (its intent recorded, no answer yet) waits for that call and is
// replayed with its answer, not answered unknown from the pending intent;
// Telegram gets the call once.
func TestLaterAttemptWaitsForCallAtTelegram(t *testing.T) {
	c := newCallInFlight(t, 5)
	got := make(chan reply, 1)
	go func() { got <- c.f.send(t, &c.second, "reply") }()
	select {
	case <-c.waiting: // attempt 2's call waits for attempt 1's
	case r := <-got:
		t.Fatalf("attempt 2's identical call was answered (%d %s) while attempt 1's was in flight", r.status, r.body)
	}
	c.held.open()
	a1, a2 := <-c.first, <-got
	if a1.status != 200 {
		t.Fatalf("attempt 1 = %d %s", a1.status, a1.body)
	}
	if a2.status != 200 || a2.header.Get(gateway.HeaderReplayed) != "true" || !bytes.Equal(a2.body, a1.body) {
		t.Errorf("attempt 2's identical call = %d %s (replayed %q, outcome %q); want attempt 1's answer replayed",
			a2.status, a2.body, a2.header.Get(gateway.HeaderReplayed), a2.header.Get(wire.HeaderOutcome))
	}
	if n := c.f.ledger("reply"); n != 1 {
		t.Errorf("the chat got %d messages; want 1", n)
	}
}

// TestWaitForCallInFlightEndsWithItsContext: a later attempt's identical
// call gives up waiting for the earlier one when its own context ends: it
// is answered not dispatched, nothing of its own was sent, and the earlier
// call still completes once.
func TestWaitForCallInFlightEndsWithItsContext(t *testing.T) {
	c := newCallInFlight(t, 6)
	params := fmt.Appendf(nil, `{"chat_id":%d,"text":"reply"}`, c.f.chat.ID)
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		status   int
		outcome  string
		replayed bool
	}
	got := make(chan result, 1)
	go func() {
		s, o, r := c.f.gw.Reply(ctx, c.second, "sendMessage", params)
		got <- result{s, o, r}
	}()
	<-c.waiting
	cancel()
	r := <-got
	if r.status != gateway.StatusNotDispatched || r.outcome != string(wire.OutcomeNotDispatched) || r.replayed {
		t.Fatalf("attempt 2, its context ended while it waited: %d %s replayed=%v; want %d %s",
			r.status, r.outcome, r.replayed, gateway.StatusNotDispatched, wire.OutcomeNotDispatched)
	}
	c.held.open()
	if a1 := <-c.first; a1.status != 200 {
		t.Fatalf("attempt 1 = %d %s", a1.status, a1.body)
	}
	if n := c.f.ledger("reply"); n != 1 {
		t.Errorf("the chat got %d messages; want 1", n)
	}
}

// TestOutcomeBound: with MaxPendingOutcomes writes in flight, the next
// call's outcome is journaled before its answer.
func TestOutcomeBound(t *testing.T) {
	g := newGate(t, 1)
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
		c.Test.BeforeOutcome = g.hook
		c.MaxPendingOutcomes = 1
	}})
	id := f.claim(t, 3)
	if r := f.send(t, &id, "one"); r.status != 200 {
		t.Fatalf("send one = %d", r.status)
	}
	<-g.entered // the bound is taken
	if r := f.send(t, &id, "two"); r.status != 200 {
		t.Fatalf("send two = %d", r.status)
	}
	got := f.outcomes(t, 3)
	var pending, answered int
	for _, o := range got {
		switch o {
		case intake.CallPending:
			pending++
		case intake.CallAnswered:
			answered++
		}
	}
	if pending != 1 || answered != 1 {
		t.Errorf("journal at the bound = %v; want the first pending (held back) and the second answered before its answer", got)
	}
}

// TestSyncOutcomes: a negative MaxPendingOutcomes journals every outcome
// before the answer.
func TestSyncOutcomes(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.MaxPendingOutcomes = -1 }})
	id := f.claim(t, 4)
	for _, text := range []string{"a", "b", "c"} {
		if r := f.send(t, &id, text); r.status != 200 {
			t.Fatalf("send %s = %d", text, r.status)
		}
		for _, o := range f.outcomes(t, 4) {
			if o != intake.CallAnswered {
				t.Fatalf("journal right after the answer = %v; want every entry answered", f.outcomes(t, 4))
			}
		}
	}
}

// TestCloseWaitsForOutcomes: Close returns only once the outcomes in
// flight are journaled (or reports that they are not, when its context
// ends first); after it, outcomes are journaled before the answer.
func TestCloseWaitsForOutcomes(t *testing.T) {
	g := newGate(t, 1)
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.Test.BeforeOutcome = g.hook }})
	id := f.claim(t, 5)
	if r := f.send(t, &id, "one"); r.status != 200 {
		t.Fatalf("send = %d", r.status)
	}
	<-g.entered
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.gw.Close(ended); !errors.Is(err, gateway.ErrOutcomesPending) || !errors.Is(err, context.Canceled) {
		t.Errorf("Close with an ended context while a write is held = %v; want ErrOutcomesPending and context.Canceled", err)
	}
	done := make(chan error, 1)
	go func() { done <- f.gw.Close(t.Context()) }()
	g.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.outcomes(t, 5); len(got) != 1 || got[0] != intake.CallAnswered {
		t.Fatalf("journal after Close = %v; want the outcome written", got)
	}
	// After Close the gateway still serves, journaling before answering.
	if r := f.send(t, &id, "two"); r.status != 200 {
		t.Fatalf("send after Close = %d", r.status)
	}
	for _, o := range f.outcomes(t, 5) {
		if o != intake.CallAnswered {
			t.Errorf("journal right after a call answered after Close = %v; want all answered", f.outcomes(t, 5))
		}
	}
}

// TestStopBeforeOutcomeCommit: the app got Telegram's answer, and the
// gateway stops for good before the outcome commits (a process killed
// there). Another gateway on the same SQLite file serves the update's next
// attempt: its identical call is answered unknown and not sent again.
func TestStopBeforeOutcomeCommit(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, _ := tg.NewPrivateChat(tg.NewUser("Ann"))
	path := filepath.Join(t.TempDir(), "gw.db")
	open := func() *sqlitestore.Store {
		st, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{Synchronous: "FULL"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	newGateway := func(st *sqlitestore.Store, hook func(string)) *httptest.Server {
		tr, err := transport.New(transport.Config{})
		if err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(gateway.Config{Token: tg.Token, APIRoot: tg.URL, Transport: tr, Store: st,
			Test: gateway.TestHooks{BeforeOutcome: hook}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		return srv
	}
	g := newGate(t, -1)
	first := open()
	now := time.Now()
	first.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now})
	id, ok, err := first.Claim(t.Context(), 1, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(200 * time.Millisecond), MaxAttempts: 3})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	f := &fixture{tg: tg, chat: chat, srv: newGateway(first, g.hook)}
	if r := f.send(t, &id, "once"); r.status != 200 {
		t.Fatalf("attempt 1 = %d %s", r.status, r.body)
	}
	<-g.entered // answered; the outcome never commits: the process "dies" here

	second := open()
	later := time.Now().Add(time.Second) // after the first lease
	next, ok, err := second.Claim(t.Context(), 1, intake.ClaimOpts{Now: later, LeaseUntil: later.Add(time.Hour), MaxAttempts: 3})
	if err != nil || !ok || next.Attempt != 2 {
		t.Fatalf("reclaim: %+v %v %v", next, ok, err)
	}
	f.srv = newGateway(second, nil)
	r := f.send(t, &next, "once")
	if r.status != gateway.StatusUnknown || r.header.Get(wire.HeaderOutcome) != "unknown" || r.header.Get(gateway.HeaderReplayed) != "true" {
		t.Errorf("the next attempt's identical call = %d %s (outcome %q, replayed %q); want unknown, replayed",
			r.status, r.body, r.header.Get(wire.HeaderOutcome), r.header.Get(gateway.HeaderReplayed))
	}
	if n := f.ledger("once"); n != 1 {
		t.Errorf("the chat got %d messages; want exactly the first", n)
	}
}

// TestReplyJournalsBeforeReturning: a webhook reply's outcome is journaled
// before Reply returns (its update settles on the answer), even with
// outcomes after the answer on for other calls.
func TestReplyJournalsBeforeReturning(t *testing.T) {
	g := newGate(t, 1)
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.Test.BeforeOutcome = g.hook }})
	id := f.claim(t, 6)
	type result struct {
		status  int
		outcome string
	}
	got := make(chan result, 1)
	go func() {
		status, outcome, _ := f.gw.Reply(t.Context(), id, "sendMessage", []byte(`{"chat_id":`+itoa(f.chat.ID)+`,"text":"reply"}`))
		got <- result{status, outcome}
	}()
	<-g.entered // the outcome is about to be written
	select {
	case r := <-got:
		t.Fatalf("Reply returned (%d %s) before its outcome was journaled", r.status, r.outcome)
	default:
	}
	g.open()
	if r := <-got; r.status != 200 || r.outcome != string(wire.OutcomeAnswered) {
		t.Fatalf("Reply = %d %s", r.status, r.outcome)
	}
	if o := f.outcomes(t, 6); len(o) != 1 || o[0] != intake.CallAnswered {
		t.Errorf("journal right after Reply returned = %v; want the answered outcome", o)
	}
}

// TestRetryReplaysWithoutATurn: a retried attempt's calls that an earlier
// attempt made and got answers for are replayed at once, without waiting
// for the chat's turn: the earlier attempt used up the chat's window, and
// a replay sends nothing, so it must not be held back (or refused with
// the limiter's 429) by it. The retry's first new call does wait its turn.
func TestRetryReplaysWithoutATurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{maxWait: time.Second})
	first := f.claim(t, 8)
	var answers [throttle.DefaultChatCount]reply
	for i := range answers { // the chat's window: Telegram's 5 per 5 s
		if answers[i] = f.send(t, &first, fmt.Sprint("reply ", i)); answers[i].status != 200 {
			t.Fatalf("attempt 1, reply %d = %d %s", i, answers[i].status, answers[i].body)
		}
	}
	// The earlier attempt's outcomes are written after its answers; the
	// retry's listing finds them final once they are (one still pending
	// then waits its turn, by design: see ahead.go).
	testkit.WaitFor(t, "attempt 1's outcomes journaled", func() bool {
		o := f.outcomes(t, 8)
		return len(o) == len(answers) && !slices.Contains(o, intake.CallPending)
	})
	f.fail(t, first)
	second := f.reclaim(t, 8)
	for i := range answers {
		r := f.send(t, &second, fmt.Sprint("reply ", i))
		if r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "true" || !bytes.Equal(r.body, answers[i].body) {
			t.Fatalf("attempt 2, reply %d = %d %s (replayed %q); want attempt 1's answer replayed at once",
				i, r.status, r.body, r.header.Get(gateway.HeaderReplayed))
		}
	}
	if r := f.send(t, &second, "a new reply"); r.status != http.StatusTooManyRequests {
		t.Fatalf("attempt 2's new call in a full window = %d %s; want the limiter's 429 (it waits its turn)", r.status, r.body)
	}
	for i := range answers {
		if n := f.ledger(fmt.Sprint("reply ", i)); n != 1 {
			t.Errorf("the chat got reply %d %d times; want 1", i, n)
		}
	}
}

// TestStaleRetryIsRefusedWithoutATurn: a retried attempt that no longer
// holds its lease gets 409 for a call the journal would replay, at once
// and without a turn: replaying ahead of the limiter is fenced as ever.
func TestStaleRetryIsRefusedWithoutATurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{maxWait: time.Second})
	first := f.claim(t, 11)
	for i := range throttle.DefaultChatCount {
		if r := f.send(t, &first, fmt.Sprint("reply ", i)); r.status != 200 {
			t.Fatalf("attempt 1, reply %d = %d %s", i, r.status, r.body)
		}
	}
	f.fail(t, first)
	second := f.reclaim(t, 11)
	f.fail(t, second)
	f.reclaim(t, 11) // the third attempt holds the lease
	if r := f.send(t, &second, "reply 0"); r.status != gateway.StatusStale || r.header.Get(gateway.HeaderReplayed) != "" {
		t.Fatalf("the stale second attempt's call = %d %s (replayed %q); want %d", r.status, r.body, r.header.Get(gateway.HeaderReplayed), gateway.StatusStale)
	}
}
