package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// fixture is a gateway in front of telegramtest, with Telegram's limits on
// in both, and a memstore to fence calls.
type fixture struct {
	tg     *telegramtest.Server
	store  *memstore.Store
	gw     *gateway.Gateway
	srv    *httptest.Server
	chat   telegramtest.Chat
	lim    *throttle.Limiter
	events chan gateway.CallEvent
}

type fixtureOpts struct {
	cfg       func(*gateway.Config)
	transport transport.Config
	tg        telegramtest.Config
	maxWait   time.Duration // the limiter's; zero means 10s
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	tg := telegramtest.NewServer(o.tg)
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := transport.New(o.transport)
	if err != nil {
		t.Fatal(err)
	}
	if o.maxWait == 0 {
		o.maxWait = 10 * time.Second
	}
	lim, err := throttle.New(throttle.Config{MaxWait: o.maxWait})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{tg: tg, store: memstore.New(), chat: chat, lim: lim, events: make(chan gateway.CallEvent, 1000)}
	cfg := gateway.Config{
		Token:           tg.Token,
		APIRoot:         tg.URL,
		Transport:       throttle.NewTransport(lim, base),
		StreamTransport: throttle.NewTransport(lim, gateway.NewStreamTransport()),
		Store:           f.store,
		OwnsIntake:      true,
		Observer:        gateway.Observer{CallFunc: func(e gateway.CallEvent) { f.events <- e }},
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	f.gw, err = gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.gw)
	t.Cleanup(f.srv.Close)
	return f
}

// claim records update id and claims it, returning the attempt identity.
func (f *fixture) claim(t *testing.T, updateID int64) intake.Identity {
	t.Helper()
	now := time.Now()
	if _, err := f.store.Add(t.Context(), intake.Incoming{UpdateID: updateID, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	return f.reclaim(t, updateID)
}

// reclaim claims updateID again (it must be claimable).
func (f *fixture) reclaim(t *testing.T, updateID int64) intake.Identity {
	t.Helper()
	now := time.Now()
	id, ok, err := f.store.Claim(t.Context(), updateID, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 10})
	if err != nil || !ok {
		t.Fatalf("Claim(%d) = %v, %v", updateID, ok, err)
	}
	return id
}

// fail settles id as failed, due at once.
func (f *fixture) fail(t *testing.T, id intake.Identity) {
	t.Helper()
	now := time.Now()
	ok, err := f.store.Settle(t.Context(), id, intake.Settlement{State: intake.StateFailed, At: now, RetryAt: now.Add(-time.Millisecond), Error: "handler failed"})
	if err != nil || !ok {
		t.Fatalf("Settle(failed) = %v, %v", ok, err)
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
	env    struct {
		OK          bool            `json:"ok"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Result      json.RawMessage `json:"result"`
	}
}

// post sends a JSON call to the gateway at path, with identity headers when
// id is not nil.
func (f *fixture) post(t *testing.T, path string, id *intake.Identity, params any) reply {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if id != nil {
		req.Header.Set(wire.HeaderUpdateID, strconv.FormatInt(id.UpdateID, 10))
		req.Header.Set(wire.HeaderAttempt, strconv.Itoa(id.Attempt))
		req.Header.Set(wire.HeaderClaimID, id.ClaimID)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r reply
	r.status, r.header = resp.StatusCode, resp.Header
	r.body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(r.body, &r.env)
	return r
}

func (f *fixture) send(t *testing.T, id *intake.Identity, text string) reply {
	t.Helper()
	return f.post(t, "/bot"+f.tg.Token+"/sendMessage", id, map[string]any{"chat_id": f.chat.ID, "text": text})
}

func (f *fixture) ledger(text string) int {
	n := 0
	for _, m := range f.tg.MessagesTo(f.chat.ID) {
		if m.Text == text {
			n++
		}
	}
	return n
}

// httpPost sends a sendMessage JSON call, ignoring the answer.
func httpPost(ctx context.Context, url string, chatID int64, text string) error {
	b, _ := json.Marshal(map[string]any{"chat_id": chatID, "text": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// attemptRoot is the per-attempt API root of id under base.
func attemptRoot(base string, id intake.Identity) string {
	return wire.AttemptRoot(base, id.UpdateID, id.Attempt, id.ClaimID)
}

// deliverThen is a proxy in front of tg that passes each call on, so that
// it arrives, and then answers the gateway through answer, given tg's own
// answer body: a proxy whose answer is not what happened.
func deliverThen(t *testing.T, tg *telegramtest.Server, answer func(w http.ResponseWriter, tgBody []byte)) *httptest.Server {
	t.Helper()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := http.NewRequestWithContext(r.Context(), r.Method, tg.URL+r.URL.RequestURI(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answer(w, body)
	}))
	t.Cleanup(proxy.Close)
	return proxy
}

// retryAttempt settles attempt id failed, due at once, and claims its
// update again, as the runner does when a handler fails: the next
// attempt's identity.
func retryAttempt(t *testing.T, st intake.Store, id intake.Identity) intake.Identity {
	t.Helper()
	at := time.Now()
	if ok, err := st.Settle(t.Context(), id, intake.Settlement{State: intake.StateFailed, At: at, RetryAt: at.Add(-time.Millisecond), Error: "handler failed"}); err != nil || !ok {
		t.Fatalf("Settle = %v, %v", ok, err)
	}
	at = time.Now()
	next, ok, err := st.Claim(t.Context(), id.UpdateID, intake.ClaimOpts{Now: at, LeaseUntil: at.Add(time.Minute), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("Claim again = %v, %v", ok, err)
	}
	return next
}
