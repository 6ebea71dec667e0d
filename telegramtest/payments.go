package telegramtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Message kinds of payments.
const (
	msgInvoice = "invoice"
	msgPayment = "successful_payment"
)

type apiInvoice struct {
	Title          string `json:"title"`
	Description    string `json:"description"`
	StartParameter string `json:"start_parameter"`
	Currency       string `json:"currency"`
	TotalAmount    int64  `json:"total_amount"`
}

type apiSuccessfulPayment struct {
	Currency                string `json:"currency"`
	TotalAmount             int64  `json:"total_amount"`
	InvoicePayload          string `json:"invoice_payload"`
	TelegramPaymentChargeID string `json:"telegram_payment_charge_id"`
	ProviderPaymentChargeID string `json:"provider_payment_charge_id"`
}

// invoice is an invoice message the bot sent, with its payload.
type invoice struct {
	apiInvoice
	payload string
}

// PaymentState is where a payment stands: [PaymentPending],
// [PaymentSucceeded] or [PaymentFailed].
type PaymentState string

// The states of a payment.
const (
	// PaymentPending: the pre-checkout query waits for the bot's answer.
	PaymentPending PaymentState = "pending"
	// PaymentSucceeded: the bot answered ok in time; the user paid and the
	// bot was sent a successful_payment message.
	PaymentSucceeded PaymentState = "succeeded"
	// PaymentFailed: the bot declined, or did not answer in time. Nothing
	// was charged and no successful_payment was sent.
	PaymentFailed PaymentState = "failed"
)

// Reasons of a failed payment ([Payment.FailReason]).
const (
	// PaymentDeclined: the bot answered the pre-checkout query ok:false.
	PaymentDeclined = "declined"
	// PaymentTimedOut: the bot did not answer the pre-checkout query
	// before its deadline ([Deadlines.PreCheckoutQuery]).
	PaymentTimedOut = "timeout"
)

// Payment is one payment a simulated user started with [Server.Pay]. It
// is a plain value, a snapshot.
type Payment struct {
	// QueryID is the pre_checkout_query's id.
	QueryID string `json:"pre_checkout_query_id"`
	// ChatID and InvoiceMessageID are the invoice message paid.
	ChatID           int64        `json:"chat_id"`
	InvoiceMessageID int64        `json:"invoice_message_id"`
	UserID           int64        `json:"user_id"`
	Currency         string       `json:"currency"`
	TotalAmount      int64        `json:"total_amount"`
	InvoicePayload   string       `json:"invoice_payload"`
	State            PaymentState `json:"state"`
	// FailReason is PaymentDeclined or PaymentTimedOut when failed.
	FailReason string `json:"fail_reason,omitempty"`
	// UserNotice is what the user was told of a failure: the bot's
	// error_message, or that the bot did not answer in time.
	UserNotice string `json:"user_notice,omitempty"`
	// TelegramPaymentChargeID and ProviderPaymentChargeID identify a
	// succeeded payment, as its successful_payment carries them.
	TelegramPaymentChargeID string `json:"telegram_payment_charge_id,omitempty"`
	ProviderPaymentChargeID string `json:"provider_payment_charge_id,omitempty"`
	// UpdateID and MessageID are the successful_payment message's update
	// and message; zero unless succeeded (UpdateID is zero too when
	// allowed_updates filters messages out).
	UpdateID  int64 `json:"update_id,omitempty"`
	MessageID int64 `json:"message_id,omitempty"`
	// Asked is when the user pressed Pay; Settled when the payment
	// succeeded or failed (for a timeout, the deadline).
	Asked   time.Time `json:"asked"`
	Settled time.Time `json:"settled,omitzero"`
}

type paymentState struct {
	Payment
	q *queryState
}

// sendInvoiceLocked is sendInvoice: an invoice message, which a simulated
// user pays with [Server.Pay].
func (s *Server) sendInvoiceLocked(p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, true)
	if e != nil {
		return nil, e
	}
	inv := &invoice{apiInvoice: apiInvoice{Title: p.get("title"), Description: p.get("description"),
		StartParameter: p.get("start_parameter"), Currency: p.get("currency")}, payload: p.get("payload")}
	switch n := utf8.RuneCountInString(inv.Title); {
	case n == 0 || n > 32:
		return nil, badRequest("INVOICE_TITLE_INVALID")
	}
	if n := utf8.RuneCountInString(inv.Description); n == 0 || n > 255 {
		return nil, badRequest("INVOICE_DESCRIPTION_INVALID")
	}
	if n := len(inv.payload); n == 0 || n > 128 {
		return nil, badRequest("INVOICE_PAYLOAD_INVALID")
	}
	if len(inv.Currency) != 3 || strings.ToUpper(inv.Currency) != inv.Currency {
		return nil, badRequest("CURRENCY_INVALID")
	}
	var prices []struct {
		Label  string `json:"label"`
		Amount int64  `json:"amount"`
	}
	if err := json.Unmarshal([]byte(p.get("prices")), &prices); err != nil || len(prices) == 0 {
		return nil, badRequest("can't parse prices JSON object")
	}
	for _, pr := range prices {
		inv.TotalAmount += pr.Amount
	}
	if inv.TotalAmount <= 0 {
		return nil, badRequest("CURRENCY_TOTAL_AMOUNT_INVALID")
	}
	m := &storedMsg{kind: msgInvoice, extra: &inv.apiInvoice, text: "", sent: inv.Title}
	if e := s.acceptLocked("sendInvoice", o, m); e != nil {
		return nil, e
	}
	d := &s.st.dl
	if d.invoices == nil {
		d.invoices = map[[2]int64]*invoice{}
	}
	d.invoices[[2]int64{o.c.ID, m.id}] = inv
	return s.apiMessageOf(o.c, m), nil
}

// Pay makes from pay the invoice the bot sent as message messageID in
// chat c: the bot receives a pre_checkout_query, whose id is the returned
// update's PreCheckoutQueryID. When the bot answers it ok:true before
// [Deadlines.PreCheckoutQuery], the payment succeeds and the bot receives
// a message with successful_payment in chat c; when it declines, or does
// not answer in time, the payment fails and the bot receives nothing
// more. [Server.Payments] tells which. Pay fails with ErrUnknownMessage
// unless that message is an invoice the bot sent.
func (s *Server) Pay(c Chat, from User, messageID int64) (Update, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, us, err := s.actorLocked(c, from, true)
	if err != nil {
		return Update{}, err
	}
	m, ok := cs.msgs[messageID]
	inv := s.st.dl.invoices[[2]int64{cs.ID, messageID}]
	if !ok || !m.fromBot || m.kind != msgInvoice || inv == nil {
		return Update{}, ErrUnknownMessage
	}
	if len(s.st.pending) >= s.cfg.MaxPendingUpdates || len(s.st.dl.payments) >= s.cfg.MaxPendingUpdates {
		return Update{}, ErrQueueFull
	}
	qid := s.nextQueryIDLocked(11)
	type apiPreCheckout struct {
		ID             string   `json:"id"`
		From           *apiUser `json:"from"`
		Currency       string   `json:"currency"`
		TotalAmount    int64    `json:"total_amount"`
		InvoicePayload string   `json:"invoice_payload"`
	}
	pq := apiPreCheckout{ID: qid, From: apiUserOf(us), Currency: inv.Currency, TotalAmount: inv.TotalAmount, InvoicePayload: inv.payload}
	u := s.enqueueLocked(Update{ChatID: us.ID, Kind: QueryPreCheckout, PreCheckoutQueryID: qid}, func(id int64) any {
		return struct {
			UpdateID         int64          `json:"update_id"`
			PreCheckoutQuery apiPreCheckout `json:"pre_checkout_query"`
		}{id, pq}
	})
	if u.Filtered {
		return u, nil
	}
	q := s.trackQueryLocked(QueryPreCheckout, qid, cs.ID, us.ID)
	d := &s.st.dl
	if d.payments == nil {
		d.payments = map[string]*paymentState{}
	}
	d.payments[qid] = &paymentState{q: q, Payment: Payment{
		QueryID: qid, ChatID: cs.ID, InvoiceMessageID: messageID, UserID: us.ID,
		Currency: inv.Currency, TotalAmount: inv.TotalAmount, InvoicePayload: inv.payload,
		State: PaymentPending, Asked: q.Asked,
	}}
	d.payOrder = append(d.payOrder, qid)
	return u, nil
}

// answerPreCheckoutLocked is answerPreCheckoutQuery, after the deadline
// and once-only checks of deadlined.
func (s *Server) answerPreCheckoutLocked(p params) (any, *apiError) {
	id := p.get("pre_checkout_query_id")
	ps, ok := s.st.dl.payments[id]
	if !ok || ps.State != PaymentPending {
		return nil, badRequest(tooOld)
	}
	if !p.has("ok") {
		return nil, badRequest("parameter \"ok\" is required")
	}
	now := s.now()
	if !p.bool("ok") {
		ps.State, ps.FailReason, ps.Settled = PaymentFailed, PaymentDeclined, now
		ps.UserNotice = p.get("error_message")
		s.pokeLocked()
		return true, nil
	}
	cs := s.st.chats[ps.ChatID]
	if cs == nil || s.st.stored >= s.cfg.MaxMessages || len(s.st.pending) >= s.cfg.MaxPendingUpdates {
		return nil, &apiError{code: 500, desc: "Internal Server Error: telegramtest cannot record the payment (Config.MaxMessages or MaxPendingUpdates)"}
	}
	s.st.dl.nextPay++
	sp := &apiSuccessfulPayment{
		Currency: ps.Currency, TotalAmount: ps.TotalAmount, InvoicePayload: ps.InvoicePayload,
		TelegramPaymentChargeID: fmt.Sprintf("tgtest_charge_%d_%d", s.botID%100000, s.st.dl.nextPay),
		ProviderPaymentChargeID: fmt.Sprintf("provider_charge_%d", s.st.dl.nextPay),
	}
	sm := &storedMsg{fromUser: ps.UserID, kind: msgPayment, extra: sp}
	s.storeLocked(cs, sm)
	am := s.apiMessageOf(cs, sm)
	u := s.enqueueLocked(Update{ChatID: cs.ID, Kind: "message", MessageID: sm.id}, func(id int64) any {
		return struct {
			UpdateID int64       `json:"update_id"`
			Message  *apiMessage `json:"message"`
		}{id, am}
	})
	ps.State, ps.Settled = PaymentSucceeded, now
	ps.TelegramPaymentChargeID, ps.ProviderPaymentChargeID = sp.TelegramPaymentChargeID, sp.ProviderPaymentChargeID
	ps.UpdateID, ps.MessageID = u.ID, sm.id
	s.pokeLocked()
	return true, nil
}

// queryExpiredLocked settles what depends on q once its deadline passed
// unanswered: a pre-checkout query's payment fails.
func (s *Server) queryExpiredLocked(q *queryState) {
	if q.Kind != QueryPreCheckout {
		return
	}
	if ps := s.st.dl.payments[q.QueryID]; ps != nil && ps.State == PaymentPending {
		ps.State, ps.FailReason, ps.Settled = PaymentFailed, PaymentTimedOut, q.Deadline
		ps.UserNotice = "the payment failed: the bot did not confirm the order in time"
	}
}

// settlePaymentsLocked fails the pending payments whose pre-checkout
// deadline passed.
func (s *Server) settlePaymentsLocked() {
	now := s.now()
	for _, id := range s.st.dl.payOrder {
		if ps := s.st.dl.payments[id]; ps.State == PaymentPending && ps.q.expired(now) {
			s.queryExpiredLocked(ps.q)
		}
	}
}

// Payments returns every payment simulated users started, in order. A
// payment whose pre-checkout query passed its deadline unanswered reads as
// failed ([PaymentTimedOut]) from that moment, without any call.
func (s *Server) Payments() []Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settlePaymentsLocked()
	out := make([]Payment, 0, len(s.st.dl.payOrder))
	for _, id := range s.st.dl.payOrder {
		out = append(out, s.st.dl.payments[id].Payment)
	}
	return out
}

// WaitPayment waits until the payment of pre-checkout query id has
// succeeded or failed and returns it. It wakes on every change, and at the
// query's deadline as the real clock measures it (with an injected
// Config.NowFunc, a test moves its clock and then calls [Server.Payments]).
// It returns ctx's error when ctx ends first.
func (s *Server) WaitPayment(ctx context.Context, id string) (Payment, error) {
	for {
		s.mu.Lock()
		s.settlePaymentsLocked()
		ps, ok := s.st.dl.payments[id]
		var p Payment
		var left time.Duration
		if ok {
			p, left = ps.Payment, ps.q.Deadline.Sub(s.now())
		}
		ch := s.events
		s.mu.Unlock()
		switch {
		case !ok:
			return Payment{}, fmt.Errorf("telegramtest: no payment with pre_checkout_query id %q", id)
		case p.State != PaymentPending:
			return p, nil
		}
		t := time.NewTimer(max(left, 0) + time.Millisecond)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return p, fmt.Errorf("telegramtest: waiting for payment %s: %w", id, ctx.Err())
		case <-s.ctx.Done():
			t.Stop()
			return p, errClosed
		}
		t.Stop()
	}
}
