package relay

import (
	"net/http"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/throttle"
)

// Kind is what an [Event] reports.
type Kind string

// The kinds of [Event], and which of its fields each one sets (besides
// Kind and Time).
const (
	// KindAccepted: an update newly recorded (webhook or polling). ID.UpdateID.
	KindAccepted Kind = "accepted"
	// KindDuplicate: an update received again and not recorded again.
	// ID.UpdateID.
	KindDuplicate Kind = "duplicate"
	// KindRejected: an update refused; Reason is one of the Reject
	// constants.
	KindRejected Kind = "rejected"
	// KindClaimed: an attempt taken. ID.
	KindClaimed Kind = "claimed"
	// KindForwarded: one forward to the endpoint ended. ID, Duration, Err
	// (nil when the endpoint answered 2xx).
	KindForwarded Kind = "forwarded"
	// KindFailed: an attempt failed. ID, Err, Reason (one of the Fail
	// constants, see [FailureReason]), Retrying (another attempt will
	// follow).
	KindFailed Kind = "failed"
	// KindSettled: a settlement the store applied. ID, State.
	KindSettled Kind = "settled"
	// KindLeaseLost: an attempt lost its ownership. ID.
	KindLeaseLost Kind = "lease_lost"
	// KindExhausted: an update given up and kept as an exhaustion. ID,
	// Err (the last failure, as text).
	KindExhausted Kind = "exhausted"
	// KindExpired: an update with a deadline ended expired: its deadline
	// passed before the app answered it, or no retry could be due before
	// it (see [DeadlineConfig]). It is settled, not an exhaustion. ID,
	// Reason (the update's type, such as "callback_query"), Err (the text
	// recorded in its row).
	KindExpired Kind = "expired"
	// KindExhaustionFailed: a delivery to the exhaustion endpoint failed;
	// it is delivered again later. ID, Err.
	KindExhaustionFailed Kind = "exhaustion_failed"
	// KindUnactedReply: the app answered an update forward with a Bot API
	// call in the body (a webhook reply) that nothing performed. ID,
	// Reason (the call's method, "" when the body was too large to read),
	// Err (why it was not performed).
	KindUnactedReply Kind = "unacted_reply"
	// KindAppAuthRefused: the app answered an update forward 401 or 403,
	// a configuration problem; the update is held in its attempt and
	// forwarded again after Duration (see [AppStatus]). ID, Err (a
	// *[forward.AuthError]), Duration, Count (the updates held now).
	KindAppAuthRefused Kind = "app_auth_refused"
	// KindAppAuthAccepted: the app answered a forward with something other
	// than 401 or 403 after refusing: the alert is over. ID.
	KindAppAuthAccepted Kind = "app_auth_accepted"
	// KindGatewayCall: the gateway answered a call of the app (or a
	// webhook reply it performed). Call, Duration.
	KindGatewayCall Kind = "gateway_call"
	// KindLimiter: the gateway's limiter granted a call its turn after
	// Duration, or Telegram answered a call 429 (Limiter.Kind says which).
	// Limiter.
	KindLimiter Kind = "limiter"
	// KindDeclined: the relay answered a query the app had not answered
	// near its deadline (see [DeclineConfig]). ID, Reason (the kind:
	// DeclineCallbackQuery, DeclinePreCheckoutQuery or
	// DeclineShippingQuery), Decline, Err (a *[DeclineError] when the
	// gateway did not perform it).
	KindDeclined Kind = "declined"
	// KindAcknowledged: an exhaustion acknowledged. ID.
	KindAcknowledged Kind = "acknowledged"
	// KindStoreError: a store error the runner could not return to a
	// caller. Step, ID.UpdateID (-1 for a sweep), Err.
	KindStoreError Kind = "store_error"
	// KindPollBatch: a getUpdates batch recorded in full and confirmed.
	// Count.
	KindPollBatch Kind = "poll_batch"
	// KindPollError: a getUpdates call or batch failed; it is retried
	// after Duration. Err.
	KindPollError Kind = "poll_error"
	// KindWebhookClaimed: the webhook was claimed on start. Host (the
	// owner host now), Owned (true).
	KindWebhookClaimed Kind = "webhook_claimed"
	// KindWebhookChecked: a periodic ownership check ended. Owned, Host
	// (the owner host), Err (the check failed; Owned is then unknown and
	// false).
	KindWebhookChecked Kind = "webhook_checked"
)

// Reasons of a [KindRejected] event.
const (
	RejectInvalid      = "invalid"      // not an update
	RejectUnauthorized = "unauthorized" // wrong webhook secret
	RejectTooLarge     = "too_large"    // body above the intake's limit
	RejectMethod       = "method"       // not a POST
	RejectStoreError   = "store_error"  // not recorded; Telegram delivers it again
)

// Event is one thing that happened in a relay. Which fields are set
// depends on Kind (see the Kind constants); the others are zero.
type Event struct {
	Kind Kind
	// Time is when the relay saw it.
	Time time.Time
	// ID is the update and, for attempts, its identity.
	ID intake.Identity
	// State is a settlement's resulting state.
	State intake.State
	// Step is the runner's step that met a store error.
	Step intake.Step
	// Reason is a rejection's reason.
	Reason string
	// Count is a poll batch's size, or the updates held
	// (KindAppAuthRefused).
	Count int
	// Duration is a forward's duration or a poll error's wait.
	Duration time.Duration
	// Retrying reports that a failed attempt will run again.
	Retrying bool
	// Expiring reports that a failed attempt was not retried because no
	// retry could be due before its update's deadline: the update ends
	// expired ([KindExpired] follows), not given up.
	Expiring bool
	// Owned and Host are a webhook claim's or check's result.
	Owned bool
	Host  string
	// Call is a gateway call's description (KindGatewayCall).
	Call gateway.CallEvent
	// Limiter is the limiter's observation (KindLimiter).
	Limiter throttle.Event
	// Decline is a decline's description (KindDeclined).
	Decline Decline
	// Err is the failure, if any. Its text has every secret the relay
	// knows masked (the bot token, the webhook secret, the app's secret
	// token); errors.Is and errors.As still reach the error it wraps,
	// whose own text is the caller's to keep to itself.
	Err error
}

// Observer receives a relay's events, for metrics, logs and dashboards. It
// is a struct of optional funcs, the shape of every tgrelay observer (see
// "Observers" in package intake's doc); the zero Observer observes
// nothing. EventFunc is called synchronously from the relay's goroutines,
// concurrently: it must be fast, must not block, and must be safe for
// concurrent use. A panic in it is recovered and ignored.
type Observer struct {
	// EventFunc sees every event (see [Kind] for what each one sets).
	EventFunc func(Event)
}

// Observers returns an Observer that passes every event to each of obs in
// turn (those without an EventFunc skipped), like io.MultiWriter. A panic
// in one is recovered and keeps the event from none of the others.
func Observers(obs ...Observer) Observer {
	fs := observerFuncs(obs...)
	if len(fs) == 0 {
		return Observer{}
	}
	return Observer{EventFunc: func(e Event) {
		for _, f := range fs {
			safeObserve(f, &e)
		}
	}}
}

// observerFuncs returns the EventFuncs of obs that are set.
func observerFuncs(obs ...Observer) []func(Event) {
	var fs []func(Event)
	for _, o := range obs {
		if o.EventFunc != nil {
			fs = append(fs, o.EventFunc)
		}
	}
	return fs
}

// safeObserve passes *e to f, recovering a panic in f. The event travels
// by pointer up to f: it is several hundred bytes, and there are a few per
// update.
func safeObserve(f func(Event), e *Event) {
	defer func() { _ = recover() }()
	f(*e)
}

// emit passes e, stamped with the time and its error's text masked (see
// maskedError), to the configured observer. It also logs the events that
// deserve a line (logEvent).
func (r *Relay) emit(e Event) {
	e.Time = r.now()
	e.Err = r.mask(e.Err)
	r.logEvent(&e)
	for _, f := range r.observers {
		safeObserve(f, &e) // each on its own: a panic in one keeps the event from none of the others
	}
}

// attemptEnded tells the gateway, if any, that attempt id no longer holds
// its claim (settled, expired, exhausted or its lease lost), so it drops
// the attempt's occurrence counters now rather than hold the last
// gateway.DefaultMaxAttempts attempts' (see [gateway.Gateway.AttemptEnded]).
// A failure is not enough: the attempt holds its claim until its
// settlement, and a handler that outlived its forward may still call.
func (r *Relay) attemptEnded(id intake.Identity) {
	if r.gw != nil {
		r.gw.AttemptEnded(id)
	}
}

// intakeObserver turns the runner's events into the relay's.
func (r *Relay) intakeObserver() intake.Observer {
	return intake.Observer{
		AcceptFunc: func(id int64, a intake.Acceptance) {
			if !r.cfg.Poll {
				r.tr.noteAccept(id, a) // for the webhook's receive span (trace.go)
			}
			switch a {
			case intake.Accepted:
				r.emit(Event{Kind: KindAccepted, ID: intake.Identity{UpdateID: id}})
			case intake.Duplicate:
				r.emit(Event{Kind: KindDuplicate, ID: intake.Identity{UpdateID: id}})
			case intake.Invalid:
				r.emit(Event{Kind: KindRejected, ID: intake.Identity{UpdateID: id}, Reason: RejectInvalid})
			}
		},
		ClaimFunc: func(id intake.Identity) { r.emit(Event{Kind: KindClaimed, ID: id}) },
		SettleFunc: func(id intake.Identity, s intake.State) {
			r.attemptEnded(id)
			r.emit(Event{Kind: KindSettled, ID: id, State: s})
		},
		FailureFunc: func(f intake.Failure) {
			r.emit(Event{Kind: KindFailed, ID: f.Identity, Err: f.Err, Retrying: f.Retrying, Expiring: f.Expiring, Reason: FailureReason(f.Err)})
		},
		ExpireFunc: func(e intake.Expiry) {
			r.attemptEnded(e.Identity)
			r.emit(Event{Kind: KindExpired, ID: e.Identity, Reason: e.Kind, Err: textError(e.Error)})
		},
		LeaseLostFunc: func(id intake.Identity) {
			r.attemptEnded(id)
			r.emit(Event{Kind: KindLeaseLost, ID: id})
		},
		ExhaustFunc: func(e intake.Exhaustion) {
			r.attemptEnded(e.Identity)
			r.emit(Event{Kind: KindExhausted, ID: e.Identity, Err: textError(e.Error)})
		},
		ExhaustionFailureFunc: func(e intake.Exhaustion, err error) {
			r.emit(Event{Kind: KindExhaustionFailed, ID: e.Identity, Err: err})
		},
		AcknowledgeFunc: func(id intake.Identity) { r.emit(Event{Kind: KindAcknowledged, ID: id}) },
		StoreErrorFunc: func(step intake.Step, id int64, err error) {
			r.emit(Event{Kind: KindStoreError, Step: step, ID: intake.Identity{UpdateID: id}, Err: err})
		},
	}
}

// textError is an error that is only its text (a stored failure).
type textError string

func (e textError) Error() string { return string(e) }

// observeRejections wraps the webhook handler to report its refusals by
// the status it answered. (Invalid bodies are reported by the runner,
// which also sees polling.)
func (r *Relay) observeRejections(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, req)
		reason := ""
		switch sw.code {
		case http.StatusForbidden:
			reason = RejectUnauthorized
		case http.StatusRequestEntityTooLarge:
			reason = RejectTooLarge
		case http.StatusMethodNotAllowed:
			reason = RejectMethod
		case http.StatusServiceUnavailable:
			reason = RejectStoreError
		}
		if reason != "" {
			r.emit(Event{Kind: KindRejected, ID: intake.Identity{UpdateID: -1}, Reason: reason})
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// maskedError is an event's error whose text had a secret in it: Error
// gives the masked text, Unwrap the original for errors.Is and errors.As.
type maskedError struct {
	text string
	err  error
}

func (e *maskedError) Error() string { return e.text }
func (e *maskedError) Unwrap() error { return e.err }

// mask returns err with the secrets in its text masked, err itself when
// its text has none.
func (r *Relay) mask(err error) error {
	if err == nil || r.red == nil {
		return err
	}
	text := err.Error()
	if masked := r.red.Redact(text); masked != text {
		return &maskedError{text: masked, err: err}
	}
	return err
}
