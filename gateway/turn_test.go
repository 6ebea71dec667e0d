package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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

// The tests of this file hold a chat's turn in the limiter (a permit the
// test took), so a fenced call waits for it as it waits behind the chat's
// previous message; the journal is a real SQLite file.

// sqliteGateway is a gateway over a SQLite journal at path, in front of tg
// with Telegram's limits on in both.
type sqliteGateway struct {
	st     *sqlitestore.Store
	lim    *throttle.Limiter
	gw     *gateway.Gateway
	srv    *httptest.Server
	events chan gateway.CallEvent // the first 64 calls' events
}

func newSQLiteGateway(t *testing.T, tg *telegramtest.Server, path string) *sqliteGateway {
	t.Helper()
	return newSQLiteGatewayAt(t, tg.Token, tg.URL, path)
}

// newSQLiteGatewayAt is newSQLiteGateway in front of the API root apiRoot
// (Telegram behind something else, say) for the bot token.
func newSQLiteGatewayAt(t *testing.T, token, apiRoot, path string) *sqliteGateway {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	base, err := transport.New(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := throttle.New(throttle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan gateway.CallEvent, 64)
	observe := func(e gateway.CallEvent) {
		select {
		case events <- e:
		default:
		}
	}
	gw, err := gateway.New(gateway.Config{Token: token, APIRoot: apiRoot, Transport: throttle.NewTransport(lim, base), Store: st,
		Observer: gateway.Observer{CallFunc: observe}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = gw.Close(context.Background()) })
	return &sqliteGateway{st: st, lim: lim, gw: gw, srv: srv, events: events}
}

// claim claims update id at now with a lease of d.
func (s *sqliteGateway) claim(t *testing.T, updateID int64, now time.Time, d time.Duration) intake.Identity {
	t.Helper()
	id, ok, err := s.st.Claim(t.Context(), updateID, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(d), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("Claim(%d) = %+v, %v, %v", updateID, id, ok, err)
	}
	return id
}

// holdTurn takes chat's turn in l until the returned permit is finished.
func holdTurn(t *testing.T, l *throttle.Limiter, chat int64) *throttle.Permit {
	t.Helper()
	p, err := l.Wait(t.Context(), "sendMessage", chat)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cancel)
	return p
}

// waitQueued returns once n calls wait in l for their turn.
func waitQueued(t *testing.T, l *throttle.Limiter, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d calls waiting for their turn", n), func() bool { return l.Stats().Waiting == n })
}

// callResult is an answer a goroutine got.
type callResult struct {
	status int
	header http.Header
	body   string
	err    error
}

// goSend posts sendMessage(chat, text) to url from a goroutine; its answer
// comes on the channel.
func goSend(ctx context.Context, url string, chat int64, text string) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		b, _ := json.Marshal(map[string]any{"chat_id": chat, "text": text})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
		if err != nil {
			ch <- callResult{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- callResult{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		ch <- callResult{status: resp.StatusCode, header: resp.Header, body: string(body), err: err}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30s")
	}
	return callResult{}
}

func countText(tg *telegramtest.Server, chat int64, text string) int {
	n := 0
	for _, m := range tg.MessagesTo(chat) {
		if m.Text == text {
			n++
		}
	}
	return n
}

// TestStopWhileWaitingItsTurnLeavesNothingPending: a fenced call waits in
// the limiter for its chat's turn when its gateway stops for good (the
// process killed). It never left, and the journal shows it: no pending
// intent on the SQLite file. Another gateway on that file serves the
// update's next attempt, whose identical call is sent (not answered
// unknown) and reaches the chat exactly once.
func TestStopWhileWaitingItsTurnLeavesNothingPending(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gw.db")
	a := newSQLiteGateway(t, tg, path)
	now := time.Now()
	if _, err := a.st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	first := a.claim(t, 1, now, time.Minute)
	holdTurn(t, a.lim, chat.ID)
	ctx, kill := context.WithCancel(t.Context())
	defer kill()
	waiting := goSend(ctx, attemptRoot(a.srv.URL, first)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply")
	waitQueued(t, a.lim, 1)

	// The process dies here. What it left on disk is what the next process
	// reads.
	b := newSQLiteGateway(t, tg, path)
	es, err := b.st.Journal(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 0 {
		t.Fatalf("journal after the kill %+v; want nothing: the call was only waiting for its turn", es)
	}
	later := now.Add(2 * time.Minute) // the first lease is over
	next := b.claim(t, 1, later, time.Hour)
	r := receive(t, goSend(t.Context(), attemptRoot(b.srv.URL, next)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
	if r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "" {
		t.Fatalf("the next attempt's call = %d %s (replayed %q); want it sent", r.status, r.body, r.header.Get(gateway.HeaderReplayed))
	}
	if n := countText(tg, chat.ID, "the reply"); n != 1 {
		t.Fatalf("the chat got the reply %d times; want exactly once", n)
	}
	if err := b.gw.Close(t.Context()); err != nil { // the outcome is on disk
		t.Fatal(err)
	}

	// The dead process's call never goes anywhere (its connection is gone).
	kill()
	<-waiting
	if n := countText(tg, chat.ID, "the reply"); n != 1 {
		t.Fatalf("the chat got the reply %d times; want exactly once", n)
	}
	es, err = b.st.Journal(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Attempt != next.Attempt || es[0].Outcome != intake.CallAnswered {
		t.Fatalf("journal %+v; want one entry, answered, of attempt %d", es, next.Attempt)
	}
}

// TestLeaseLostWhileWaitingItsTurn: an attempt's call waits for its turn;
// meanwhile the attempt fails and the update is claimed again, and the new
// attempt makes the identical call, which waits behind it. When its turn
// comes the old attempt's call is refused 409 without being sent (the
// fence is checked at the turn, not before the wait), and the new
// attempt's call is sent: the chat gets the message once.
func TestLeaseLostWhileWaitingItsTurn(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	g := newSQLiteGateway(t, tg, filepath.Join(t.TempDir(), "gw.db"))
	now := time.Now()
	if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 7, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	first := g.claim(t, 7, now, time.Minute)
	held := holdTurn(t, g.lim, chat.ID)
	old := goSend(t.Context(), attemptRoot(g.srv.URL, first)+"/bot"+tg.Token+"/sendMessage", chat.ID, "once")
	waitQueued(t, g.lim, 1)

	ok, err := g.st.Settle(t.Context(), first, intake.Settlement{State: intake.StateFailed, At: now, RetryAt: now, Error: "handler timed out"})
	if err != nil || !ok {
		t.Fatalf("Settle = %v, %v", ok, err)
	}
	second := g.claim(t, 7, time.Now(), time.Hour)
	current := goSend(t.Context(), attemptRoot(g.srv.URL, second)+"/bot"+tg.Token+"/sendMessage", chat.ID, "once")
	waitQueued(t, g.lim, 2)
	held.Cancel() // the chat's turn comes

	r := receive(t, old)
	if r.status != gateway.StatusStale || r.header.Get(wire.HeaderOutcome) != "stale" {
		t.Errorf("the old attempt's call at its turn = %d %s; want %d stale", r.status, r.body, gateway.StatusStale)
	}
	r = receive(t, current)
	if r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "" {
		t.Errorf("the current attempt's call = %d %s (replayed %q); want it sent", r.status, r.body, r.header.Get(gateway.HeaderReplayed))
	}
	if n := countText(tg, chat.ID, "once"); n != 1 {
		t.Errorf("the chat got the message %d times; want once", n)
	}
	if err := g.gw.Close(t.Context()); err != nil { // the outcome is on disk
		t.Fatal(err)
	}
	es, err := g.st.Journal(t.Context(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Attempt != second.Attempt || es[0].Occurrence != 1 {
		t.Errorf("journal %+v; want one entry, occurrence 1, of attempt %d", es, second.Attempt)
	}
}

// TestIdenticalCallsWaitingTogether: two identical calls of one attempt
// wait for their turn at once. Their occurrences are 1 and 2 in the order
// they were made, though their intents are recorded only at their turns;
// both are sent, and the next attempt's two identical calls replay them.
func TestIdenticalCallsWaitingTogether(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	g := newSQLiteGateway(t, tg, filepath.Join(t.TempDir(), "gw.db"))
	now := time.Now()
	if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 9, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	first := g.claim(t, 9, now, time.Hour)
	url := attemptRoot(g.srv.URL, first) + "/bot" + tg.Token + "/sendMessage"
	held := holdTurn(t, g.lim, chat.ID)
	one := goSend(t.Context(), url, chat.ID, "twice")
	waitQueued(t, g.lim, 1)
	two := goSend(t.Context(), url, chat.ID, "twice")
	waitQueued(t, g.lim, 2)
	if es, _ := g.st.Journal(t.Context(), 9); len(es) != 0 {
		t.Fatalf("journal while both wait %+v; want nothing yet", es)
	}
	held.Cancel()
	for _, ch := range []<-chan callResult{one, two} {
		if r := receive(t, ch); r.status != 200 {
			t.Fatalf("a call = %d %s; want sent", r.status, r.body)
		}
	}
	if n := countText(tg, chat.ID, "twice"); n != 2 {
		t.Fatalf("the chat got %d messages; want the two the attempt made", n)
	}
	if err := g.gw.Close(t.Context()); err != nil { // the outcomes are on disk
		t.Fatal(err)
	}
	es, err := g.st.Journal(t.Context(), 9)
	if err != nil {
		t.Fatal(err)
	}
	occ := map[int]intake.CallOutcome{}
	for _, e := range es {
		occ[e.Occurrence] = e.Outcome
	}
	if len(es) != 2 || occ[1] != intake.CallAnswered || occ[2] != intake.CallAnswered {
		t.Fatalf("journal %+v; want occurrences 1 and 2, answered", es)
	}

	ok, err := g.st.Settle(t.Context(), first, intake.Settlement{State: intake.StateFailed, At: time.Now(), RetryAt: time.Now(), Error: "x"})
	if err != nil || !ok {
		t.Fatalf("Settle = %v, %v", ok, err)
	}
	next := g.claim(t, 9, time.Now(), time.Hour)
	url = attemptRoot(g.srv.URL, next) + "/bot" + tg.Token + "/sendMessage"
	for i := range 2 {
		if r := receive(t, goSend(t.Context(), url, chat.ID, "twice")); r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "true" {
			t.Fatalf("the next attempt's call %d = %d %s (replayed %q); want replayed", i+1, r.status, r.body, r.header.Get(gateway.HeaderReplayed))
		}
	}
	if n := countText(tg, chat.ID, "twice"); n != 2 {
		t.Fatalf("the chat got %d messages after the retry; want still 2", n)
	}
}
