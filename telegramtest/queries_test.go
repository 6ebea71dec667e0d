package telegramtest_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

const tooOld = "Bad Request: query is too old and response timeout expired or query ID is invalid"

// deadlineFixture is a server on a manual clock, one user in a private
// chat, and a message of the bot's with a button.
type deadlineFixture struct {
	fixture
	clk    *testkit.Clock
	button int64
}

func setupDeadlines(t *testing.T, d telegramtest.Deadlines) deadlineFixture {
	t.Helper()
	clk := newClock()
	cfg := noLimits()
	cfg.NowFunc, cfg.Deadlines, cfg.ControlAPI = clk.Now, d, true
	f := setup(t, cfg)
	sent := decode[sentMessage](t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "Sure?",
		"reply_markup": json.RawMessage(`{"inline_keyboard":[[{"text":"Yes","callback_data":"yes"}]]}`)}).Result)
	return deadlineFixture{f, clk, sent.MessageID}
}

func (f deadlineFixture) outcome(t *testing.T, id string) telegramtest.QueryOutcome {
	t.Helper()
	o, ok := f.srv.QueryOutcomeOf(id)
	if !ok {
		t.Fatalf("no outcome for query %s", id)
	}
	return o
}

func TestCallbackQueryDeadline(t *testing.T) {
	t.Parallel()
	t.Run("answered in time, then again", func(t *testing.T) {
		t.Parallel()
		f := setupDeadlines(t, telegramtest.Deadlines{})
		press, err := f.srv.PressButton(f.chat, f.user, f.button, "yes")
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(telegramtest.DefaultCallbackDeadline) // exactly at the deadline: still in time
		wantOK(t, call(t, f.srv, "answerCallbackQuery", map[string]any{"callback_query_id": press.CallbackQueryID}))
		wantError(t, call(t, f.srv, "answerCallbackQuery", map[string]any{"callback_query_id": press.CallbackQueryID, "text": "again"}), 400, tooOld)
		o := f.outcome(t, press.CallbackQueryID)
		if o.State != telegramtest.QueryAnswered || o.Repeated != 1 || o.Late != 0 || !o.AnsweredAt.Equal(o.Deadline) || o.Kind != telegramtest.QueryCallback {
			t.Errorf("outcome = %+v", o)
		}
		if n := len(f.srv.CallbackAnswers()); n != 1 {
			t.Errorf("%d callback answers, want 1", n)
		}
	})
	t.Run("late", func(t *testing.T) {
		t.Parallel()
		f := setupDeadlines(t, telegramtest.Deadlines{})
		press, err := f.srv.PressButton(f.chat, f.user, f.button, "yes")
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(telegramtest.DefaultCallbackDeadline - time.Millisecond)
		if o := f.outcome(t, press.CallbackQueryID); o.State != telegramtest.QueryWaiting {
			t.Errorf("before the deadline: %+v", o)
		}
		f.clk.Advance(2 * time.Millisecond)
		if o := f.outcome(t, press.CallbackQueryID); o.State != telegramtest.QueryExpired {
			t.Errorf("past the deadline, unanswered: %+v", o)
		}
		wantError(t, call(t, f.srv, "answerCallbackQuery", map[string]any{"callback_query_id": press.CallbackQueryID}), 400, tooOld)
		if o := f.outcome(t, press.CallbackQueryID); o.State != telegramtest.QueryExpired || o.Late != 1 {
			t.Errorf("after a late answer: %+v", o)
		}
		if n := len(f.srv.CallbackAnswers()); n != 0 {
			t.Errorf("%d callback answers accepted, want 0", n)
		}
	})
	t.Run("configured deadline", func(t *testing.T) {
		t.Parallel()
		f := setupDeadlines(t, telegramtest.Deadlines{CallbackQuery: time.Second})
		press, _ := f.srv.PressButton(f.chat, f.user, f.button, "yes")
		f.clk.Advance(1001 * time.Millisecond)
		wantError(t, call(t, f.srv, "answerCallbackQuery", map[string]any{"callback_query_id": press.CallbackQueryID}), 400, tooOld)
	})
	t.Run("no deadline", func(t *testing.T) {
		t.Parallel()
		f := setupDeadlines(t, telegramtest.Deadlines{CallbackQuery: -1})
		press, _ := f.srv.PressButton(f.chat, f.user, f.button, "yes")
		f.clk.Advance(time.Hour)
		wantOK(t, call(t, f.srv, "answerCallbackQuery", map[string]any{"callback_query_id": press.CallbackQueryID}))
		if o := f.outcome(t, press.CallbackQueryID); !o.Deadline.IsZero() || o.State != telegramtest.QueryAnswered {
			t.Errorf("outcome = %+v", o)
		}
	})
}

func TestInlineQueryDeadline(t *testing.T) {
	t.Parallel()
	f := setupDeadlines(t, telegramtest.Deadlines{})
	results := []map[string]any{{"type": "article", "id": "1", "title": "Cat", "input_message_content": map[string]string{"message_text": "meow"}}}
	late, _ := f.srv.InlineQuery(f.user, "late")
	inTime, _ := f.srv.InlineQuery(f.user, "in time")
	f.clk.Advance(telegramtest.DefaultInlineDeadline)
	wantOK(t, call(t, f.srv, "answerInlineQuery", map[string]any{"inline_query_id": inTime.InlineQueryID, "results": results}))
	f.clk.Advance(time.Millisecond)
	wantError(t, call(t, f.srv, "answerInlineQuery", map[string]any{"inline_query_id": late.InlineQueryID, "results": results}), 400, tooOld)
	got := f.srv.QueryOutcomes()
	if len(got) != 2 || got[0].QueryID != late.InlineQueryID || got[0].State != telegramtest.QueryExpired || got[0].Late != 1 ||
		got[1].State != telegramtest.QueryAnswered || got[1].Kind != telegramtest.QueryInline {
		t.Errorf("outcomes = %+v", got)
	}
}

// invoice has the bot send an invoice in f's chat and returns its message id.
func (f deadlineFixture) invoice(t *testing.T) int64 {
	t.Helper()
	a := call(t, f.srv, "sendInvoice", map[string]any{"chat_id": f.chat.ID, "title": "Coffee", "description": "A cup",
		"payload": "order-42", "currency": "XTR", "prices": []map[string]any{{"label": "Cup", "amount": 30}, {"label": "Tip", "amount": 5}}})
	wantOK(t, a)
	m := decode[struct {
		MessageID int64 `json:"message_id"`
		Invoice   struct {
			Currency    string `json:"currency"`
			TotalAmount int64  `json:"total_amount"`
		} `json:"invoice"`
	}](t, a.Result)
	if m.Invoice.TotalAmount != 35 || m.Invoice.Currency != "XTR" {
		t.Fatalf("sendInvoice = %s", a.Result)
	}
	return m.MessageID
}

// updateOf decodes the single pending update of f.
func pendingUpdates(t *testing.T, f deadlineFixture) []map[string]json.RawMessage {
	t.Helper()
	a := call(t, f.srv, "getUpdates", map[string]any{"timeout": 0})
	return decode[[]map[string]json.RawMessage](t, a.Result)
}

func TestPayment(t *testing.T) {
	t.Parallel()
	t.Run("answered ok in time", func(t *testing.T) {
		t.Parallel()
		f := setupDeadlines(t, telegramtest.Deadlines{})
		inv := f.invoice(t)
		if _, err := f.srv.PressButton(f.chat, f.user, f.button, "no such"); err == nil {
			t.Fatal("press of a missing button succeeded")
		}
		if _, err := f.srv.Pay(f.chat, f.user, f.button); err == nil {
			t.Fatal("paid a message that is no invoice")
		}
		upd, err := f.srv.Pay(f.chat, f.user, inv)
		if err != nil || upd.Kind != telegramtest.QueryPreCheckout || upd.PreCheckoutQueryID == "" {
			t.Fatalf("Pay = %+v, %v", upd, err)
		}
		ups := pendingUpdates(t, f)
		pq := decode[struct {
			ID             string `json:"id"`
			Currency       string `json:"currency"`
			TotalAmount    int64  `json:"total_amount"`
			InvoicePayload string `json:"invoice_payload"`
		}](t, ups[len(ups)-1]["pre_checkout_query"])
		if pq.ID != upd.PreCheckoutQueryID || pq.TotalAmount != 35 || pq.InvoicePayload != "order-42" {
			t.Fatalf("pre_checkout_query = %+v", pq)
		}
		if p := f.srv.Payments(); len(p) != 1 || p[0].State != telegramtest.PaymentPending {
			t.Fatalf("before the answer: %+v", p)
		}
		f.clk.Advance(9 * time.Second)
		wantOK(t, call(t, f.srv, "answerPreCheckoutQuery", map[string]any{"pre_checkout_query_id": pq.ID, "ok": true}))
		wantError(t, call(t, f.srv, "answerPreCheckoutQuery", map[string]any{"pre_checkout_query_id": pq.ID, "ok": true}), 400, tooOld)
		p := f.srv.Payments()[0]
		if p.State != telegramtest.PaymentSucceeded || p.TelegramPaymentChargeID == "" || p.ProviderPaymentChargeID == "" || p.UpdateID == 0 {
			t.Fatalf("payment = %+v", p)
		}
		ups = pendingUpdates(t, f)
		last := ups[len(ups)-1]
		msg := decode[struct {
			Chat              struct{ ID int64 } `json:"chat"`
			SuccessfulPayment struct {
				Currency                string `json:"currency"`
				TotalAmount             int64  `json:"total_amount"`
				InvoicePayload          string `json:"invoice_payload"`
				TelegramPaymentChargeID string `json:"telegram_payment_charge_id"`
				ProviderPaymentChargeID string `json:"provider_payment_charge_id"`
			} `json:"successful_payment"`
		}](t, last["message"])
		sp := msg.SuccessfulPayment
		if msg.Chat.ID != f.chat.ID || sp.TotalAmount != 35 || sp.Currency != "XTR" || sp.InvoicePayload != "order-42" ||
			sp.TelegramPaymentChargeID != p.TelegramPaymentChargeID || sp.ProviderPaymentChargeID != p.ProviderPaymentChargeID {
			t.Errorf("successful_payment message = %s", last["message"])
		}
	})
	t.Run("declined", func(t *testing.T) {
		t.Parallel()
		f := setupDeadlines(t, telegramtest.Deadlines{})
		upd, _ := f.srv.Pay(f.chat, f.user, f.invoice(t))
		wantOK(t, call(t, f.srv, "answerPreCheckoutQuery", map[string]any{"pre_checkout_query_id": upd.PreCheckoutQueryID, "ok": false, "error_message": "Sold out"}))
		p := f.srv.Payments()[0]
		if p.State != telegramtest.PaymentFailed || p.FailReason != telegramtest.PaymentDeclined || p.UserNotice != "Sold out" || p.UpdateID != 0 {
			t.Errorf("payment = %+v", p)
		}
		if n := f.srv.PendingUpdates(); n != 1 { // the pre_checkout_query only
			t.Errorf("%d pending updates, want 1 (no successful_payment)", n)
		}
	})
	t.Run("not answered in time", func(t *testing.T) {
		t.Parallel()
		f := setupDeadlines(t, telegramtest.Deadlines{})
		upd, _ := f.srv.Pay(f.chat, f.user, f.invoice(t))
		f.clk.Advance(telegramtest.DefaultPreCheckoutDeadline + time.Millisecond)
		p := f.srv.Payments()[0]
		if p.State != telegramtest.PaymentFailed || p.FailReason != telegramtest.PaymentTimedOut || p.UserNotice == "" || !p.Settled.Equal(p.Asked.Add(telegramtest.DefaultPreCheckoutDeadline)) {
			t.Errorf("payment = %+v", p)
		}
		wantError(t, call(t, f.srv, "answerPreCheckoutQuery", map[string]any{"pre_checkout_query_id": upd.PreCheckoutQueryID, "ok": true}), 400, tooOld)
		if o := f.outcome(t, upd.PreCheckoutQueryID); o.State != telegramtest.QueryExpired || o.Late != 1 {
			t.Errorf("outcome = %+v", o)
		}
		if p := f.srv.Payments()[0]; p.State != telegramtest.PaymentFailed || p.UpdateID != 0 {
			t.Errorf("a late ok changed the payment: %+v", p)
		}
		if n := f.srv.PendingUpdates(); n != 1 {
			t.Errorf("%d pending updates, want 1 (no successful_payment)", n)
		}
	})
}

func TestControlAPIPayments(t *testing.T) {
	t.Parallel()
	f := setupDeadlines(t, telegramtest.Deadlines{})
	inv := f.invoice(t)
	var upd struct {
		Kind          string `json:"kind"`
		PreCheckoutID string `json:"pre_checkout_query_id"`
	}
	if code := control(t, f.srv, "POST", "/_sandbox/pay", map[string]any{"chat_id": f.chat.ID, "user_id": f.user.ID, "message_id": inv}, &upd); code != 200 || upd.PreCheckoutID == "" {
		t.Fatalf("pay = %d %+v", code, upd)
	}
	f.clk.Advance(time.Minute)
	var pays []telegramtest.Payment
	control(t, f.srv, "GET", "/_sandbox/payments", nil, &pays)
	if len(pays) != 1 || pays[0].State != telegramtest.PaymentFailed || pays[0].FailReason != telegramtest.PaymentTimedOut {
		t.Errorf("payments = %+v", pays)
	}
	var qs []telegramtest.QueryOutcome
	control(t, f.srv, "GET", "/_sandbox/queries", nil, &qs)
	if len(qs) != 1 || qs[0].State != telegramtest.QueryExpired || qs[0].QueryID != upd.PreCheckoutID {
		t.Errorf("queries = %+v", qs)
	}
}
