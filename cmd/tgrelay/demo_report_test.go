package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// reportFixture is the state a good demo run ends in, built by hand: the
// sandbox's ledger, the store's rows, the journal and the bot's memory. Each
// test breaks one thing and expects the report to say so.
type reportFixture struct {
	t       *testing.T
	d       *demo
	api     *botapi.Client
	rows    []intake.Row
	journal map[int64][]intake.JournalEntry
	// the messages, by role
	plain, flaky, poison, burst, inFlight demoMessage
}

func newReportFixture(t *testing.T) *reportFixture {
	t.Helper()
	sb := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, Logf: func(string, ...any) {}})
	t.Cleanup(sb.Close)
	hc, err := transport.NewClient(transport.Config{Proxy: noProxy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	api, err := botapi.New(sb.Token, botapi.Config{APIRoot: sb.URL, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	d := &demo{view: newDemoView(io.Discard), sandbox: sb, bot: newDemoBot(hc, sb.Token, newDemoView(io.Discard), 0), users: 2, messages: 2}
	if err := d.makeUsers(); err != nil {
		t.Fatal(err)
	}
	f := &reportFixture{t: t, d: d, api: api, journal: map[int64][]intake.JournalEntry{}}
	say := func(u telegramtest.User, c telegramtest.Chat, text string, phase int) demoMessage {
		m, err := d.sayAs(u, c, text, phase)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	f.plain = say(d.people[0], d.chats[0], "hello 1 from Ada", 1)
	f.flaky = say(d.people[0], d.chats[0], "this one is "+demoFlaky, 1)
	f.poison = say(d.people[1], d.chats[1], "a "+demoPoison+" pill", 1)
	f.burst = say(d.burstUser, d.burstChat, "a "+demoBurst+" of replies, please", 1)
	f.inFlight = say(d.people[1], d.chats[1], "still there? 1 from Bob", 2)
	d.flakyID, d.poisonID, d.burstID, d.inFlightID = f.flaky.updateID, f.poison.updateID, f.burst.updateID, f.inFlight.updateID
	d.firstPID, d.secondPID, d.killInFlight = 100, 200, 1

	now := time.Now()
	row := func(m demoMessage, st intake.State, attempts int) {
		f.rows = append(f.rows, intake.Row{UpdateID: m.updateID, State: st, Attempts: attempts, SettledAt: now})
	}
	// The plain message: replied once.
	f.deliver(f.plain, demoEchoPrefix+f.plain.text)
	f.bot(f.plain.updateID, http.StatusOK, demoCall{attempt: 1, text: demoEchoPrefix + f.plain.text, status: 200, outcome: "answered"})
	row(f.plain, intake.StateCompleted, 1)
	// The flaky one: replied on attempt 1, replayed on attempts 2 and 3.
	f.deliver(f.flaky, demoEchoPrefix+f.flaky.text)
	echo := demoEchoPrefix + f.flaky.text
	f.bot(f.flaky.updateID, http.StatusOK,
		demoCall{attempt: 1, text: echo, status: 200, outcome: "answered"},
		demoCall{attempt: 2, text: echo, status: 200, outcome: "answered", replayed: true},
		demoCall{attempt: 3, text: echo, status: 200, outcome: "answered", replayed: true})
	row(f.flaky, intake.StateCompleted, 3)
	d.bot.late = &demoCall{attempt: 1, text: demoLatePrefix + f.flaky.text, status: gateway.StatusStale, outcome: string(wire.OutcomeStale)}
	// The poison one: refused, exhausted, delivered and acknowledged.
	d.bot.updates[f.poison.updateID] = &demoBotUpdate{attempts: []int{1}, status: http.StatusBadRequest}
	d.bot.exhaustions = []forward.ExhaustionPayload{{UpdateID: f.poison.updateID, Attempt: 1}}
	row(f.poison, intake.StateAbandoned, 1)
	// The burst: seven replies, each answered 200.
	var calls []demoCall
	for k := 1; k <= demoBurstReplies; k++ {
		f.deliver(f.burst, demoBurstText(k, f.burst.text))
		calls = append(calls, demoCall{attempt: 1, text: demoBurstText(k, f.burst.text), status: 200, outcome: "answered", took: time.Second})
	}
	f.bot(f.burst.updateID, http.StatusOK, calls...)
	row(f.burst, intake.StateCompleted, 1)
	// The one in flight at the kill: it arrived; the retry was answered
	// unknown from an intent without outcome.
	f.deliver(f.inFlight, demoEchoPrefix+f.inFlight.text)
	f.bot(f.inFlight.updateID, http.StatusOK,
		demoCall{attempt: 1, text: demoEchoPrefix + f.inFlight.text},
		demoCall{attempt: 2, text: demoEchoPrefix + f.inFlight.text, status: gateway.StatusUnknown, outcome: string(wire.OutcomeUnknown), replayed: true})
	row(f.inFlight, intake.StateCompleted, 2)
	f.journal[f.inFlight.updateID] = []intake.JournalEntry{{UpdateID: f.inFlight.updateID, Call: intake.Call{Method: "sendMessage", Occurrence: 1}, Attempt: 1, Outcome: intake.CallPending}}
	// The sandbox delivered every update.
	for sb.PendingUpdates() > 0 {
		if _, err := api.Call(t.Context(), "getUpdates", map[string]any{"offset": f.inFlight.updateID + 1}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// deliver sends text to m's chat, as the gateway would have.
func (f *reportFixture) deliver(m demoMessage, text string) {
	f.t.Helper()
	if _, err := f.api.Call(f.t.Context(), "sendMessage", map[string]any{"chat_id": m.chatID, "text": text}); err != nil {
		f.t.Fatal(err)
	}
}

// bot records what the bot saw and answered for an update.
func (f *reportFixture) bot(id int64, status int, calls ...demoCall) {
	u := &demoBotUpdate{status: status, calls: calls}
	for _, c := range calls {
		if len(u.attempts) == 0 || u.attempts[len(u.attempts)-1] != c.attempt {
			u.attempts = append(u.attempts, c.attempt)
		}
	}
	f.d.bot.updates[id] = u
}

// report runs the checks and returns the failed ones' texts.
func (f *reportFixture) failed() []string {
	f.t.Helper()
	stats := intake.Stats{Count: map[intake.State]int{}}
	for _, r := range f.rows {
		stats.Count[r.State]++
	}
	var out []string
	for _, c := range f.d.checks(stats, f.rows, f.journal) {
		if !c.ok {
			out = append(out, c.text)
		}
	}
	return out
}

// wantFailed asserts that exactly the checks starting with the prefixes failed.
func (f *reportFixture) wantFailed(prefixes ...string) {
	f.t.Helper()
	got := f.failed()
	if len(got) != len(prefixes) {
		f.t.Fatalf("failed checks:\n%s\nwant %d starting with %v", strings.Join(got, "\n"), len(prefixes), prefixes)
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(got[i], p) {
			f.t.Errorf("failed check %d is %q, want it to start with %q", i, got[i], p)
		}
	}
}

func TestDemoReportHoldsForAGoodRun(t *testing.T) {
	t.Parallel()
	f := newReportFixture(t)
	f.wantFailed()
}

func TestDemoReportFailsOnADoubledReply(t *testing.T) {
	t.Parallel()
	f := newReportFixture(t)
	f.deliver(f.plain, demoEchoPrefix+f.plain.text)
	f.wantFailed("replies:")
}

func TestDemoReportFailsWhenTheRetriedReplyIsDoubled(t *testing.T) {
	t.Parallel()
	f := newReportFixture(t)
	f.deliver(f.flaky, demoEchoPrefix+f.flaky.text)
	f.wantFailed("replies:", "retry:")
}

func TestDemoReportFailsOnAnAnsweredReplyMissingFromTheLedger(t *testing.T) {
	t.Parallel()
	f := newReportFixture(t)
	// The bot was told 200 for a reply Telegram never received: lost, and
	// a lost reply is never a pass.
	m, err := f.d.sayAs(f.d.people[0], f.d.chats[0], "hello 2 from Ada", 1)
	if err != nil {
		t.Fatal(err)
	}
	f.bot(m.updateID, http.StatusOK, demoCall{attempt: 1, text: demoEchoPrefix + m.text, status: 200, outcome: "answered"})
	f.rows = append(f.rows, intake.Row{UpdateID: m.updateID, State: intake.StateCompleted, Attempts: 1, SettledAt: time.Now()})
	if _, err := f.api.Call(t.Context(), "getUpdates", map[string]any{"offset": m.updateID + 1}); err != nil {
		t.Fatal(err)
	}
	f.wantFailed("replies:")
}

func TestDemoReportFailsOnAnUnknownTheJournalDoesNotExplain(t *testing.T) {
	t.Parallel()
	f := newReportFixture(t)
	f.journal[f.inFlight.updateID] = []intake.JournalEntry{{UpdateID: f.inFlight.updateID, Call: intake.Call{Method: "sendMessage", Occurrence: 1}, Attempt: 1, Outcome: intake.CallAnswered, Status: 200}}
	f.wantFailed("replies:", "crash:")
}

func TestDemoReportFailsOnA429AtTheApp(t *testing.T) {
	t.Parallel()
	f := newReportFixture(t)
	u := f.d.bot.updates[f.burst.updateID]
	u.calls[3].status, u.calls[3].outcome = http.StatusTooManyRequests, string(wire.OutcomeThrottled)
	f.wantFailed("burst:")
}

func TestDemoReportFailsWhenAStaleSendArrives(t *testing.T) {
	t.Parallel()
	f := newReportFixture(t)
	f.deliver(f.flaky, f.d.bot.late.text)
	f.wantFailed("stale:")
}

func TestDemoReportFailsWhenAStaleSendIsNotRefused(t *testing.T) {
	t.Parallel()
	f := newReportFixture(t)
	f.d.bot.late.status, f.d.bot.late.outcome = http.StatusOK, string(wire.OutcomeAnswered)
	f.wantFailed("stale:")
}
