package relay_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/wire"
)

// The tests of this file call the gateway as an app does: through the
// relay's own gateway listener (the server serve builds), over real
// loopback sockets, with a real http.Client, in front of telegramtest;
// the real timeouts are shortened by configuration.

// gwAnswer is what the app got for one call.
type gwAnswer struct {
	status int
	header http.Header
	body   struct {
		OK          bool   `json:"ok"`
		ErrorCode   int    `json:"error_code"`
		Description string `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	elapsed time.Duration
}

// gwSend posts sendMessage to root (the gateway's base URL, or an
// attempt's API root) with client; err is the client's error.
func gwSend(t *testing.T, client *http.Client, root, token string, chatID int64, text string) (gwAnswer, error) {
	t.Helper()
	var a gwAnswer
	body := fmt.Sprintf(`{"chat_id":%d,"text":%q}`, chatID, text)
	start := time.Now()
	resp, err := client.Post(root+"/bot"+token+"/sendMessage", "application/json", bytes.NewBufferString(body))
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, err
	}
	a.elapsed = time.Since(start)
	a.status, a.header = resp.StatusCode, resp.Header
	if err := json.Unmarshal(b, &a.body); err != nil {
		t.Fatalf("answer %d %q is not Telegram-shaped: %v", resp.StatusCode, b, err)
	}
	return a, nil
}

// gatewayRelay starts a relay serving its gateway with gc (a loopback
// listener added) in front of srv.
func gatewayRelay(t *testing.T, srv *telegramtest.Server, gc relay.GatewayConfig, fwd forward.Config) (*relay.Relay, *recorder) {
	t.Helper()
	r, rec, _ := gatewayRelayLogs(t, srv, gc, fwd)
	return r, rec
}

// gatewayRelayLogs is gatewayRelay, also returning the relay's log.
func gatewayRelayLogs(t *testing.T, srv *telegramtest.Server, gc relay.GatewayConfig, fwd forward.Config) (*relay.Relay, *recorder, *testkit.SyncBuffer) {
	t.Helper()
	rec, logs := newRecorder(), &testkit.SyncBuffer{}
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), logs, rec)
	if fwd.URL != "" {
		cfg.Forward = fwd
	}
	gc.Listener = listen(t)
	cfg.Gateway = gc
	return start(t, cfg), rec, logs
}

// callEvents returns the gateway calls the relay reported.
func callEvents(rec *recorder) []gateway.CallEvent {
	var out []gateway.CallEvent
	for _, e := range rec.all(relay.KindGatewayCall) {
		out = append(out, e.Call)
	}
	return out
}

// TestGatewayAnswersBeyondWaitAt429AtOnce: a group's third message within
// its minute (the limit shortened to 2 a minute), whose turn is a minute
// away while the call may wait 10 s, is answered at once with a
// Telegram-shaped 429 whose retry_after is the time to its turn, and
// nothing is sent. Every answer carries Tgrelay-Call-Timeout, the bound
// the server keeps.
func TestGatewayAnswersBeyondWaitAt429AtOnce(t *testing.T) {
	srv := fakeTelegram(t)
	u := srv.NewUser("Ann")
	group, err := srv.NewGroup("Chess club", u)
	if err != nil {
		t.Fatal(err)
	}
	const maxWait = 10 * time.Second
	r, _ := gatewayRelay(t, srv, relay.GatewayConfig{
		Limits:          throttle.Config{Group: throttle.Limit{Count: 2, Per: time.Minute}, MaxWait: maxWait},
		ResponseTimeout: 2 * time.Second,
	}, forward.Config{})
	client := &http.Client{}
	for i := range 2 {
		a, err := gwSend(t, client, r.GatewayURL(), srv.Token, group.ID, fmt.Sprint("move ", i))
		if err != nil || a.status != 200 {
			t.Fatalf("message %d: %+v, %v", i, a, err)
		}
		if got, want := a.header.Get(gateway.HeaderCallTimeout), "22"; got != want { // 10 s + 2 s + 10 s journaling
			t.Errorf("%s = %q, want %q", gateway.HeaderCallTimeout, got, want)
		}
	}
	a, err := gwSend(t, client, r.GatewayURL(), srv.Token, group.ID, "move 2")
	if err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusTooManyRequests || a.header.Get(wire.HeaderOutcome) != string(wire.OutcomeThrottled) || a.body.ErrorCode != 429 {
		t.Fatalf("third message: %d %q %+v; want the gateway's 429", a.status, a.header.Get(wire.HeaderOutcome), a.body)
	}
	// Its turn is a minute after the first message, less the moments
	// the first two took.
	if ra := a.body.Parameters.RetryAfter; ra < 50 || ra > 60 || a.body.Description != "Too Many Requests: retry after "+strconv.Itoa(ra) {
		t.Errorf("retry_after %d, description %q; want the time to its turn (about 60 s)", ra, a.body.Description)
	}
	if a.elapsed >= maxWait {
		t.Errorf("answered after %v; want at once, not after waiting MaxWait (%v)", a.elapsed, maxWait)
	}
	if n := srv.Calls()["sendMessage"]; n != 2 || len(srv.MessagesTo(group.ID)) != 2 {
		t.Errorf("Telegram got %d calls, the group %d messages; want 2 and 2", n, len(srv.MessagesTo(group.ID)))
	}
}

// TestGatewayPassesTelegram429BeyondWait: Telegram's own 429 whose
// retry_after outlasts what is left of the call's wait is answered to the
// app as it came, and nothing more is sent; one that the wait can outlast
// is retried until it cannot, then answered the same way: the app always
// gets the 429, never a closed connection.
func TestGatewayPassesTelegram429BeyondWait(t *testing.T) {
	srv := fakeTelegram(t)
	u := srv.NewUser("Bo")
	chat, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	r, rec := gatewayRelay(t, srv, relay.GatewayConfig{
		Limits:          throttle.Config{MaxWait: 2500 * time.Millisecond},
		ResponseTimeout: 2 * time.Second,
	}, forward.Config{})
	client := &http.Client{}

	if err := srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 30}); err != nil {
		t.Fatal(err)
	}
	a, err := gwSend(t, client, r.GatewayURL(), srv.Token, chat.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusTooManyRequests || a.body.Parameters.RetryAfter != 30 || a.header.Get(wire.HeaderOutcome) != "" {
		t.Fatalf("answer %d %+v (outcome header %q); want Telegram's own 429, retry_after 30", a.status, a.body, a.header.Get(wire.HeaderOutcome))
	}
	if n := telegram429s(rec); n != 1 || len(srv.MessagesTo(chat.ID)) != 0 {
		t.Fatalf("Telegram refused %d calls, the chat has %d messages; want the one refusal, nothing sent", n, len(srv.MessagesTo(chat.ID)))
	}
	srv.Disarm()

	// A retry_after of 1 s, every time: tried while the wait allows.
	srv2 := fakeTelegram(t)
	chat2, _ := srv2.NewPrivateChat(srv2.NewUser("Cy"))
	r2, rec2 := gatewayRelay(t, srv2, relay.GatewayConfig{
		Limits:          throttle.Config{MaxWait: 2500 * time.Millisecond},
		ResponseTimeout: 2 * time.Second,
	}, forward.Config{})
	if err := srv2.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 1, Times: -1}); err != nil {
		t.Fatal(err)
	}
	a, err = gwSend(t, client, r2.GatewayURL(), srv2.Token, chat2.ID, "two")
	if err != nil {
		t.Fatalf("the app got %v; want Telegram's 429", err)
	}
	if a.status != http.StatusTooManyRequests || a.body.Parameters.RetryAfter != 1 {
		t.Fatalf("answer %d %+v; want Telegram's 429", a.status, a.body)
	}
	if n := telegram429s(rec2); n < 2 || n > 4 {
		t.Errorf("Telegram refused %d calls; want a retry per second of the 2.5 s wait", n)
	}
	for _, rc := range []*recorder{rec, rec2} {
		// The call's event follows the answer's write, which the app may
		// read to its end first.
		testkit.WaitFor(t, "the call's event", func() bool { return len(callEvents(rc)) >= 1 })
		es := callEvents(rc)
		if len(es) != 1 || !es[0].Telegram429 || es[0].Undelivered {
			t.Errorf("call events %+v; want one delivered answer, Telegram's 429", es)
		}
	}
}

// TestGatewaySilentUpstreamAnswersUnknown: a Telegram that reads the call
// and never answers gets the app a 502 marked unknown within the response
// timeout (shortened to 300 ms), also after the call waited for its turn,
// never a closed connection; the call is not sent again.
func TestGatewaySilentUpstreamAnswersUnknown(t *testing.T) {
	srv := fakeTelegram(t)
	chat, _ := srv.NewPrivateChat(srv.NewUser("Di"))
	r, rec := gatewayRelay(t, srv, relay.GatewayConfig{
		Limits:          throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Second}, MaxWait: 3 * time.Second},
		ResponseTimeout: 300 * time.Millisecond,
	}, forward.Config{})
	client := &http.Client{}
	if a, err := gwSend(t, client, r.GatewayURL(), srv.Token, chat.ID, "first"); err != nil || a.status != 200 {
		t.Fatalf("first: %+v %v", a, err)
	}
	if err := srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultHang}); err != nil {
		t.Fatal(err)
	}
	a, err := gwSend(t, client, r.GatewayURL(), srv.Token, chat.ID, "second") // waits for its turn, then meets silence
	if err != nil {
		t.Fatalf("the app got %v; want an answer", err)
	}
	if a.status != gateway.StatusUnknown || a.header.Get(wire.HeaderOutcome) != string(wire.OutcomeUnknown) {
		t.Fatalf("answer %d %q %+v; want 502 unknown", a.status, a.header.Get(wire.HeaderOutcome), a.body)
	}
	testkit.WaitFor(t, "the call event", func() bool { return len(callEvents(rec)) == 2 })
	if e := callEvents(rec)[1]; e.Tries != 1 || e.Outcome != wire.OutcomeUnknown || e.Undelivered {
		t.Errorf("call event %+v; want unknown after one try (not sent again), delivered", e)
	}
}

// telegram429s counts the 429 answers Telegram itself gave the gateway.
func telegram429s(rec *recorder) int {
	n := 0
	for _, e := range rec.all(relay.KindLimiter) {
		if e.Limiter.Kind == throttle.EventTooManyRequests {
			n++
		}
	}
	return n
}

// TestGatewayAppGoneWhileWaitingNotSent: an app whose HTTP client gives up
// while its call waits for its turn stops the call: it is never sent, and
// the answer it did not get is reported undelivered.
func TestGatewayAppGoneWhileWaitingNotSent(t *testing.T) {
	srv := fakeTelegram(t)
	chat, _ := srv.NewPrivateChat(srv.NewUser("Ed"))
	r, rec := gatewayRelay(t, srv, relay.GatewayConfig{
		Limits: throttle.Config{Chat: throttle.Limit{Count: 1, Per: 3 * time.Second}, MaxWait: 10 * time.Second},
	}, forward.Config{})
	if a, err := gwSend(t, &http.Client{}, r.GatewayURL(), srv.Token, chat.ID, "first"); err != nil || a.status != 200 {
		t.Fatalf("first: %+v %v", a, err)
	}
	impatient := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := gwSend(t, impatient, r.GatewayURL(), srv.Token, chat.ID, "second"); err == nil {
		t.Fatal("the impatient client got an answer; want it to give up while the call waits")
	}
	testkit.WaitFor(t, "the call's end", func() bool { return len(callEvents(rec)) == 2 })
	e := callEvents(rec)[1]
	if e.Outcome != wire.OutcomeNotDispatched || !e.Undelivered || e.Tries > 1 {
		t.Fatalf("call event %+v; want not dispatched, undelivered", e)
	}
	// The call has ended without leaving: nothing can send it now.
	if n := srv.Calls()["sendMessage"]; n != 1 || len(srv.MessagesTo(chat.ID)) != 1 {
		t.Fatalf("Telegram got %d calls, the chat %d messages; want only the first", n, len(srv.MessagesTo(chat.ID)))
	}
}

// TestGatewayAppGoneAfterSendJournaled: an app whose client gives up after
// its fenced call left (Telegram slow to answer) does not stop it: the
// message is sent once, Telegram's answer journaled, the answer reported
// undelivered; the update's next attempt makes the same call and gets the
// journaled answer (replayed), so the chat has the message once.
func TestGatewayAppGoneAfterSendJournaled(t *testing.T) {
	srv := fakeTelegram(t)
	u := srv.NewUser("Flo")
	chat, _ := srv.NewPrivateChat(u)
	var (
		mu       sync.Mutex
		attempts []error
		replayed []bool
		calls    func() []gateway.CallEvent // the relay's call events, once it runs
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		root := r.Header.Get(wire.HeaderAPIRoot)
		mu.Lock()
		first, events := len(attempts) == 0, calls
		mu.Unlock()
		client := &http.Client{}
		if first {
			client.Timeout = 300 * time.Millisecond // gives up while Telegram takes 1 s
		} else {
			// The retry's call comes after the first call ended (its event is
			// observed once its outcome is recorded or being recorded). One
			// that came while the first was still waiting for Telegram would
			// find the intent pending and be answered unknown, a different
			// case (the chat's limit of 1/s releases it just as Telegram's
			// 1 s answer arrives, so without this the two race).
			testkit.WaitFor(t, "the first call's end", func() bool { return len(events()) >= 1 })
		}
		a, err := gwSend(t, client, root, srv.Token, chat.ID, "the reply")
		mu.Lock()
		attempts = append(attempts, err)
		replayed = append(replayed, err == nil && a.header.Get(gateway.HeaderReplayed) == "true")
		mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError) // retried
		}
	}))
	t.Cleanup(app.Close)
	if err := srv.Arm(telegramtest.Fault{Method: "sendMessage", Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	_, rec, logs := gatewayRelayLogs(t, srv, relay.GatewayConfig{}, forward.Config{URL: app.URL})
	mu.Lock()
	calls = func() []gateway.CallEvent { return callEvents(rec) }
	mu.Unlock()
	if _, err := srv.SendText(chat, u, "hi"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the retry to complete", func() bool { return rec.count("settled") >= 2 })
	mu.Lock()
	defer mu.Unlock()
	var ne interface{ Timeout() bool }
	if len(attempts) != 2 || !errors.As(attempts[0], &ne) || attempts[1] != nil || !replayed[1] {
		t.Fatalf("attempts %v, replayed %v; want the first to time out, the second replayed", attempts, replayed)
	}
	if n := len(srv.MessagesTo(chat.ID)); n != 1 || srv.Calls()["sendMessage"] != 1 {
		t.Fatalf("the chat got %d messages, Telegram %d calls; want 1 and 1", n, srv.Calls()["sendMessage"])
	}
	testkit.WaitFor(t, "the calls' events", func() bool { return len(callEvents(rec)) >= 2 })
	es := callEvents(rec)
	if len(es) != 2 || es[0].Outcome != wire.OutcomeAnswered || !es[0].Undelivered || es[1].Undelivered || !es[1].Replayed {
		t.Fatalf("call events %+v; want the first answered but undelivered, the second replayed and delivered", es)
	}
	if ws := logLines(logs, "relay: the app gave up on a gateway call that was sent; its outcome is journaled, but an app that sends it again unfenced makes it twice: set its HTTP timeout above the gateway's Tgrelay-Call-Timeout"); len(ws) != 1 || ws[0]["method"] != "sendMessage" {
		t.Errorf("warnings %v; want one naming the call", ws)
	}
}

// TestGatewayAppGoneDuringTelegram429Retry: Telegram refused the call with
// 429 (it did not act) and the gateway waits to send it again; the app
// gives up meanwhile: the call is not sent again.
func TestGatewayAppGoneDuringTelegram429Retry(t *testing.T) {
	srv := fakeTelegram(t)
	chat, _ := srv.NewPrivateChat(srv.NewUser("Gus"))
	r, rec := gatewayRelay(t, srv, relay.GatewayConfig{Limits: throttle.Config{MaxWait: 10 * time.Second}}, forward.Config{})
	if err := srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 2}); err != nil {
		t.Fatal(err)
	}
	impatient := &http.Client{Timeout: 500 * time.Millisecond}
	if _, err := gwSend(t, impatient, r.GatewayURL(), srv.Token, chat.ID, "refused once"); err == nil {
		t.Fatal("the impatient client got an answer; want it to give up during the retry's wait")
	}
	testkit.WaitFor(t, "the call's end", func() bool { return len(callEvents(rec)) == 1 })
	if e := callEvents(rec)[0]; e.Outcome != wire.OutcomeNotDispatched || !e.Undelivered {
		t.Fatalf("call event %+v; want not dispatched, undelivered", e)
	}
	if n := telegram429s(rec); n != 1 || len(srv.MessagesTo(chat.ID)) != 0 || srv.Calls()["sendMessage"] != 0 {
		t.Fatalf("Telegram refused %d calls, got %d more, the chat has %d messages; want the one refusal and nothing else",
			n, srv.Calls()["sendMessage"], len(srv.MessagesTo(chat.ID)))
	}
}
