package relay_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// The tests of this file run a relay between telegramtest, which keeps
// Telegram's deadlines, and a slow app, on one manual clock shared by the
// sandbox (its deadlines) and the relay (its declines): no test waits for
// a deadline in real time.

// slowApp is the app: it reports each update it is forwarded, then waits
// for the test to tell it what to do with it.
type slowApp struct {
	srv     *httptest.Server
	token   string
	arrived chan map[string]json.RawMessage
	// act receives, per update, the call to make through the gateway
	// before answering the forward ("" makes none).
	act     chan appCall
	results chan appResult
}

type appCall struct {
	method string
	params map[string]any
}

type appResult struct {
	status   int
	replayed string
	body     string
}

func newSlowApp(t *testing.T, token string) *slowApp {
	t.Helper()
	a := &slowApp{token: token, arrived: make(chan map[string]json.RawMessage, 10), act: make(chan appCall, 10), results: make(chan appResult, 10)}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u map[string]json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&u)
		a.arrived <- u
		var c appCall
		select {
		case c = <-a.act:
		case <-r.Context().Done():
			return
		}
		if c.method != "" {
			b, _ := json.Marshal(c.params)
			resp, err := http.Post(r.Header.Get(wire.HeaderAPIRoot)+"/bot"+a.token+"/"+c.method, "application/json", bytes.NewReader(b))
			if err != nil {
				t.Errorf("the app's %s: %v", c.method, err)
			} else {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				a.results <- appResult{resp.StatusCode, resp.Header.Get(gateway.HeaderReplayed), string(body)}
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *slowApp) next(t *testing.T, what string) map[string]json.RawMessage {
	t.Helper()
	select {
	case u := <-a.arrived:
		return u
	case <-time.After(testkit.WaitLimit):
		t.Fatalf("timed out waiting for the app to be forwarded %s", what)
		return nil
	}
}

func (a *slowApp) result(t *testing.T) appResult {
	t.Helper()
	select {
	case r := <-a.results:
		return r
	case <-time.After(testkit.WaitLimit):
		t.Fatal("timed out waiting for the app's call")
		return appResult{}
	}
}

// deadlineSetup is a sandbox and a relay on one step clock, with a user in
// a private chat and the app behind the relay.
type deadlineSetup struct {
	clk  *relay.ManualClock
	tg   *telegramtest.Server
	app  *slowApp
	rec  *recorder
	user telegramtest.User
	chat telegramtest.Chat
}

func newDeadlineSetup(t *testing.T) *deadlineSetup {
	t.Helper()
	s := &deadlineSetup{clk: relay.NewManualClock(true)}
	s.tg = telegramtest.NewServer(telegramtest.Config{NowFunc: s.clk.Now, Limits: telegramtest.Limits{Disabled: true}, Logf: t.Logf})
	t.Cleanup(s.tg.Close)
	s.user = s.tg.NewUser("Ann")
	var err error
	if s.chat, err = s.tg.NewPrivateChat(s.user); err != nil {
		t.Fatal(err)
	}
	s.app = newSlowApp(t, s.tg.Token)
	s.rec = newRecorder()
	cfg := baseConfig(t, s.tg, newBotEndpoint(t, nil), &testkit.SyncBuffer{}, s.rec)
	cfg.Forward = forward.Config{URL: s.app.srv.URL, Timeout: time.Minute}
	cfg.Decline.Test = relay.DeclineTestHooks{NowFunc: s.clk.Now, AfterFunc: s.clk.AfterFunc}
	start(t, cfg)
	return s
}

// botSend makes a call of the bot's straight to the sandbox and returns
// the message id of its result.
func (s *deadlineSetup) botSend(t *testing.T, method string, params map[string]any) int64 {
	t.Helper()
	b, _ := json.Marshal(params)
	resp, err := s.tg.Client().Post(s.tg.URL+"/bot"+s.tg.Token+"/"+method, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		OK     bool
		Result struct {
			MessageID int64 `json:"message_id"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || !env.OK {
		t.Fatalf("%s: %+v %v", method, env, err)
	}
	return env.Result.MessageID
}

// completed waits until update id completed.
func (s *deadlineSetup) completed(t *testing.T, id int64) {
	t.Helper()
	testkit.WaitFor(t, "the update to complete", func() bool {
		for _, e := range s.rec.all(relay.KindSettled) {
			if e.ID.UpdateID == id && e.State == intake.StateCompleted {
				return true
			}
		}
		return false
	})
}

// waitArmed waits until the relay armed the decline of the update the
// app was just forwarded (the guard arms before the forward starts, so
// this holds already; the wait documents the order).
func (s *deadlineSetup) waitArmed(t *testing.T) {
	t.Helper()
	testkit.WaitFor(t, "the decline to be armed", func() bool { return s.clk.Armed() > 0 })
}

// TestSlowAppSpinnerAnsweredOnce: a user presses a button and the app is
// slow. The relay answers the press empty 2 s before the 15 s deadline,
// in time; the app's own answerCallbackQuery, later, is the decline's
// answer replayed from the journal; Telegram saw exactly one answer, in
// time, and no late one.
func TestSlowAppSpinnerAnsweredOnce(t *testing.T) {
	s := newDeadlineSetup(t)
	msg := s.botSend(t, "sendMessage", map[string]any{"chat_id": s.chat.ID, "text": "Sure?",
		"reply_markup": map[string]any{"inline_keyboard": [][]map[string]string{{{"text": "Yes", "callback_data": "yes"}}}}})
	press, err := s.tg.PressButton(s.chat, s.user, msg, "yes")
	if err != nil {
		t.Fatal(err)
	}
	s.app.next(t, "the press")
	s.waitArmed(t)
	s.clk.Advance(12 * time.Second)
	if n := len(s.tg.CallbackAnswers()); n != 0 {
		t.Fatalf("%d answers 3 s before the deadline; want none yet", n)
	}
	s.clk.Advance(time.Second) // 13 s: the decline time
	got := s.tg.CallbackAnswers()
	if len(got) != 1 || got[0].Text != "" {
		t.Fatalf("answers at 13 s = %+v; want one empty answer", got)
	}
	s.clk.Advance(5 * time.Second) // the app answers at 18 s, past the deadline
	s.app.act <- appCall{"answerCallbackQuery", map[string]any{"callback_query_id": press.CallbackQueryID, "text": "Done!"}}
	r := s.app.result(t)
	if r.status != 200 || r.replayed != "true" {
		t.Errorf("the app's late answer = %+v; want the decline's answer, replayed", r)
	}
	s.completed(t, press.ID)
	o, _ := s.tg.QueryOutcomeOf(press.CallbackQueryID)
	if o.State != telegramtest.QueryAnswered || o.Late != 0 || o.Repeated != 0 || o.AnsweredAt.After(o.Deadline) {
		t.Errorf("query outcome = %+v; want answered in time, nothing late or repeated", o)
	}
	if n := len(s.tg.CallbackAnswers()); n != 1 || s.tg.Calls()["answerCallbackQuery"] != 1 {
		t.Errorf("Telegram saw %d answers in %d calls; want 1", n, s.tg.Calls()["answerCallbackQuery"])
	}
	if ev := s.rec.all(relay.KindDeclined); len(ev) != 1 || ev[0].Reason != relay.DeclineCallbackQuery || ev[0].Decline.Replayed ||
		ev[0].Err != nil || ev[0].ID.UpdateID != press.ID || ev[0].Decline.QueryID != press.CallbackQueryID {
		t.Errorf("declined events = %+v; want the one decline, sent", ev)
	}
}

// invoice has the bot send an invoice and returns its message id.
func (s *deadlineSetup) invoice(t *testing.T) int64 {
	t.Helper()
	return s.botSend(t, "sendInvoice", map[string]any{"chat_id": s.chat.ID, "title": "Coffee", "description": "A cup",
		"payload": "order-7", "currency": "XTR", "prices": []map[string]any{{"label": "Cup", "amount": 30}}})
}

// TestUnansweredPreCheckoutDeclined: the app does not answer a
// pre-checkout query; the relay declines it before the 10 s deadline:
// the payment fails (declined, not timed out), and no successful_payment
// is ever sent.
func TestUnansweredPreCheckoutDeclined(t *testing.T) {
	s := newDeadlineSetup(t)
	upd, err := s.tg.Pay(s.chat, s.user, s.invoice(t))
	if err != nil {
		t.Fatal(err)
	}
	s.app.next(t, "the pre-checkout query")
	s.waitArmed(t)
	s.clk.Advance(8 * time.Second)
	p := s.tg.Payments()[0]
	if p.State != telegramtest.PaymentFailed || p.FailReason != telegramtest.PaymentDeclined || p.UserNotice != relay.DefaultPreCheckoutDeclineMessage {
		t.Errorf("payment at 8 s = %+v; want declined with the default message", p)
	}
	s.app.act <- appCall{} // the app gives up without answering
	s.completed(t, upd.ID)
	s.clk.Advance(time.Minute)
	if p := s.tg.Payments()[0]; p.State != telegramtest.PaymentFailed || p.FailReason != telegramtest.PaymentDeclined || p.UpdateID != 0 {
		t.Errorf("payment = %+v", p)
	}
	if o, _ := s.tg.QueryOutcomeOf(upd.PreCheckoutQueryID); o.State != telegramtest.QueryAnswered || o.AnsweredAt.After(o.Deadline) {
		t.Errorf("query outcome = %+v; want answered (declined) in time", o)
	}
	if n := s.tg.PendingUpdates(); n != 0 {
		t.Errorf("%d updates pending; want none (no successful_payment)", n)
	}
}

// TestAnsweredPreCheckoutPays: the app answers ok in time: the payment
// succeeds, the app is forwarded the successful_payment, and the relay
// declines nothing, then or later.
func TestAnsweredPreCheckoutPays(t *testing.T) {
	s := newDeadlineSetup(t)
	upd, err := s.tg.Pay(s.chat, s.user, s.invoice(t))
	if err != nil {
		t.Fatal(err)
	}
	s.app.next(t, "the pre-checkout query")
	s.clk.Advance(3 * time.Second)
	s.app.act <- appCall{"answerPreCheckoutQuery", map[string]any{"pre_checkout_query_id": upd.PreCheckoutQueryID, "ok": true}}
	if r := s.app.result(t); r.status != 200 || r.replayed != "" {
		t.Errorf("the app's answer = %+v", r)
	}
	s.completed(t, upd.ID)
	paid := s.app.next(t, "the successful payment")
	var m struct {
		SuccessfulPayment struct {
			TelegramPaymentChargeID string `json:"telegram_payment_charge_id"`
			InvoicePayload          string `json:"invoice_payload"`
		} `json:"successful_payment"`
	}
	if err := json.Unmarshal(paid["message"], &m); err != nil || m.SuccessfulPayment.InvoicePayload != "order-7" || m.SuccessfulPayment.TelegramPaymentChargeID == "" {
		t.Errorf("forwarded %s; want the successful_payment", paid["message"])
	}
	s.app.act <- appCall{}
	s.clk.Advance(time.Minute)
	if p := s.tg.Payments()[0]; p.State != telegramtest.PaymentSucceeded || p.TelegramPaymentChargeID != m.SuccessfulPayment.TelegramPaymentChargeID {
		t.Errorf("payment = %+v", p)
	}
	if n := s.tg.Calls()["answerPreCheckoutQuery"]; n != 1 {
		t.Errorf("%d answerPreCheckoutQuery calls reached Telegram; want 1 (no decline)", n)
	}
	if ev := s.rec.all(relay.KindDeclined); len(ev) != 0 {
		t.Errorf("declined events = %+v; want none", ev)
	}
}
