package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/readall"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/wire"
)

// HeaderReplayed is "true" on an answer taken from the journal. The other
// headers the gateway reads and writes are package wire's: the identity
// headers ([wire.HeaderUpdateID], [wire.HeaderAttempt],
// [wire.HeaderClaimID]) and [wire.HeaderOutcome].
const HeaderReplayed = "Tgrelay-Replayed"

// HTTP statuses of the answers the gateway makes itself. Each comes with a
// Telegram-shaped JSON body ({"ok":false,"error_code":…,"description":…})
// and a [wire.HeaderOutcome].
const (
	// StatusStale answers a call whose attempt lost its lease.
	StatusStale = http.StatusConflict
	// StatusNotDispatched answers a call that could not leave within
	// MaxSendTries. Sending it again is safe.
	StatusNotDispatched = http.StatusServiceUnavailable
	// StatusUnknown answers a call whose outcome is unknown, sent now or
	// journaled earlier. Do not send it again blindly.
	StatusUnknown = http.StatusBadGateway
)

// Gateway sends Bot API calls for an app: through the limiter and the
// dispatch-aware transport of its Config, fenced by the attempt identity a
// call carries and journaled so a retried update does not send the same
// call twice. It is an [http.Handler] (see [Gateway.ServeHTTP]) and, for
// Go programs, an [http.RoundTripper] ([Gateway.RoundTripper]). Safe for
// concurrent use.
type Gateway struct {
	cfg     Config
	journal intake.JournalStore // nil when the store has no journal
	occ     *occurrences
	// outcomes tracks the outcome writes that follow their answers.
	outcomes *outcomeWrites
	flight   *callsInFlight // the calls that may hold their entry pending (flight.go)
	seed     maphash.Seed   // of callHash (ahead.go)
	retry    backoff.Capped
	red      botapi.Redactor // the token, in every form, and anything shaped like one
	bounds   Bounds
	bodies   *bodyBudget  // Config.MaxBufferedTotal
	queries  queryTurns   // one answer per query in flight (query.go)
	tracer   trace.Tracer // nil without Config.TracerProvider (trace.go)
}

// New returns a Gateway for cfg, or a *[ConfigError] naming the invalid
// field (it matches [ErrInvalidConfig]).
func New(cfg Config) (*Gateway, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: c, occ: newOccurrences(c.MaxAttempts), outcomes: newOutcomeWrites(max(c.MaxPendingOutcomes, 0)),
		flight: &callsInFlight{}, seed: maphash.MakeSeed(),
		retry: backoff.Capped{Base: 100 * time.Millisecond, Factor: 2, Max: time.Second}, bounds: boundsOf(c), bodies: newBodyBudget(c.MaxBufferedTotal)}
	g.journal, _ = c.Store.(intake.JournalStore)
	g.red.Add(c.Token)
	if c.TracerProvider != nil {
		g.tracer = c.TracerProvider.Tracer(tracerName)
	}
	return g, nil
}

// call is one Bot API call on its way through the gateway.
type call struct {
	method      string // the Bot API method, or "file"
	upstream    string // the URL it goes to
	httpMethod  string
	contentType string
	query       url.Values
	// prefix is the buffered start of the body; the whole body when
	// complete, else rest follows it.
	prefix   []byte
	complete bool
	rest     *countingReader
	// held is the share of Config.MaxBufferedTotal the call took to read
	// its body (see readBody), given back by releaseBody.
	held          int64
	contentLength int64 // -1 when unknown
	// streamAnswer passes a large answer (a file) through unbuffered.
	streamAnswer bool
	// durableOutcome records the outcome before the call is answered (a
	// webhook reply, whose update settles on its answer).
	durableOutcome bool
	// leash stops the call while it has not left, when its app goes.
	leash *leash
}

// answer is what the app gets.
type answer struct {
	status   int
	header   http.Header
	body     []byte
	stream   io.ReadCloser // follows body when set
	outcome  wire.Outcome
	replayed bool
	tg429    bool
	// refusal: body is Telegram's refusal, a JSON object whose "ok" is
	// false, as readAnswer found it in an answer whose status is not 2xx;
	// false for every other answer. Only a refusal says Telegram did not
	// act on a call; a body with "ok":true is Telegram's success whatever
	// the status it came under (something between us and Telegram may
	// have changed the status).
	refusal bool
	tries   int
}

// countingReader reports whether anything was read from r.
type countingReader struct {
	r    io.Reader
	read int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}

// telegramError builds a Telegram-shaped error answer of the gateway's own.
func telegramError(status int, outcome wire.Outcome, description string, retryAfter int) answer {
	env := map[string]any{"ok": false, "error_code": status, "description": description}
	if retryAfter > 0 {
		env["parameters"] = map[string]any{"retry_after": retryAfter}
	}
	b, _ := json.Marshal(env)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(wire.HeaderOutcome, string(outcome))
	return answer{status: status, header: h, body: b, outcome: outcome}
}

// redact removes the token (raw or URL-escaped) and anything shaped like one.
func (g *Gateway) redact(s string) string { return g.red.Redact(s) }

// handle answers c, fenced and journaled under id when id is not nil.
//
// The fence is checked, and the journal's intent recorded, when the call
// may leave: through a transport that runs [throttle.WithBeforeSend]
// functions, once the limiter granted the call its turn (see gate); through
// any other transport, before the call is handed to it.
func (g *Gateway) handle(ctx context.Context, id *intake.Identity, c *call) answer {
	if id == nil {
		return g.send(ctx, c)
	}
	if g.cfg.Store == nil {
		return telegramError(http.StatusBadRequest, wire.OutcomeRefused,
			"Bad Request: tgrelay: this gateway has no store, so it cannot fence a call that carries an attempt identity", 0)
	}
	gt := &gate{g: g, ctx: ctx, id: *id, method: c.method}
	if g.journal == nil || readOnly(c.method) {
		return g.sendGated(ctx, c, gt)
	}

	// The occurrence is taken now, in the order the attempt made its calls,
	// though the intent is recorded only when the call's turn comes: two
	// identical calls waiting in the limiter keep the numbers 1 and 2.
	hash := canonicalHash(c.contentType, c.query, c.prefix, c.complete)
	method, n := c.method, 0
	qm, qh, isQuery := queryAnswerKey(c)
	if isQuery {
		// At most one answer per query (query.go): keyed by the query, one
		// occurrence, one answer in flight.
		release, err := acquireTurn(ctx, &g.queries, queryTurn{id.UpdateID, qh})
		if err != nil {
			return telegramError(StatusNotDispatched, wire.OutcomeNotDispatched,
				"Service Unavailable: tgrelay: the call ended while an earlier answer to the same query was in flight; nothing was sent", 0)
		}
		defer release()
		method, hash, n = qm, qh, 1
	} else {
		n = g.occ.take(*id, c.method, hash)
	}
	cl := intake.Call{Method: method, ParamsHash: hash, Occurrence: n}
	gt.journaled, gt.call = true, cl
	key := outcomeKey{id.UpdateID, cl}
	var a answer
	if g.finalInJournal(ctx, *id, cl) && gt.runAhead() {
		a = gt.refusal // replayed without a turn (ahead.go)
	} else {
		a = g.sendGated(ctx, c, gt)
	}
	// The entry waits on this call until its outcome is recorded: an
	// identical call meanwhile waits for it (flight.go).
	defer gt.exitFlight()
	switch gt.state {
	case gateReplayed:
		return a
	case gateRecorded:
	default:
		// No intent stands (none was recorded, or a try that never left
		// undid it), so nothing left: a refusal, or a call that gave up
		// waiting for its turn. A later identical call sends it.
		if !isQuery {
			g.occ.giveBack(*id, c.method, hash, n)
		}
		return a
	}
	res := intake.CallResult{Outcome: intake.CallUnknown}
	switch {
	case a.outcome == wire.OutcomeNotDispatched || a.outcome == wire.OutcomeThrottled,
		a.status == http.StatusTooManyRequests && a.refusal,
		a.outcome == wire.OutcomeAnswered && a.status >= 500 && a.refusal,
		isQuery && answerRefusedQueryOpen(a):
		// Nothing was sent, or Telegram did not act (the limiter's 429,
		// or Telegram's own, in its JSON: a proxy's 429 page may stand
		// in front of a call that arrived, and is journaled as the
		// answer it is; its own 5xx, which botapi.Classify reads as
		// retryable: readAnswer made any other 5xx unknown; or it
		// refused an answer to a query that is still open, such as a
		// text too long): a later identical call, or the query's next
		// answer, may send it. Only a refusal ("ok":false) says so: a
		// success body under a 429 or 5xx status says Telegram acted.
		res = intake.CallResult{Outcome: intake.CallNotDispatched, Body: a.body}
	case a.outcome == wire.OutcomeUnknown:
		res.Body = a.body
	case a.stream != nil || len(a.body) > intake.MaxJournalBody:
		res.Body = []byte(`{"ok":false,"error_code":502,"description":"tgrelay: Telegram's answer was too large to journal"}`)
	default: // answered or throttled: an answer the app saw, replayed as is
		res = intake.CallResult{Outcome: intake.CallAnswered, Status: a.status, Body: a.body}
	}
	// A journal row never keeps the token: a page in front of Telegram may
	// quote the request's path (Apache's 404 does), and a description may
	// echo the token or its secret half.
	if masked := g.redact(string(res.Body)); masked != string(res.Body) {
		res.Body = []byte(masked)
	}
	// A not-dispatched outcome is written before the answer: it frees the
	// occurrence number for the app's next identical call (see
	// occurrences). The others may follow the answer (see outcomes.go).
	if res.Outcome != intake.CallNotDispatched && !c.durableOutcome {
		if done, ok := g.outcomes.start(key); ok {
			idv, method, outcome, leave := *id, c.method, a.outcome, gt.leave
			gt.leave = nil // the write gives the flight back
			go func() {
				defer done()
				g.recordOutcome(ctx, idv, method, cl, res, outcome, true)
				if leave != nil {
					leave()
				}
			}()
			return a
		}
	}
	ok := g.recordOutcome(ctx, *id, c.method, cl, res, a.outcome, false)
	if res.Outcome == intake.CallNotDispatched && ok && !isQuery {
		g.occ.giveBack(*id, c.method, hash, n)
	}
	return a
}

// sendGated sends c with gt run when the call may leave; when gt refuses
// the call, its answer is gt's.
func (g *Gateway) sendGated(ctx context.Context, c *call, gt *gate) answer {
	a := g.sendWith(ctx, c, gt)
	if gt.state == gateRefused || gt.state == gateReplayed {
		return gt.refusal
	}
	return a
}

// runsBeforeSend reports whether rt runs [throttle.WithBeforeSend]
// functions ([throttle.Transport] does).
func runsBeforeSend(rt http.RoundTripper) bool {
	r, ok := rt.(interface{ RunsBeforeSend() bool })
	return ok && r.RunsBeforeSend()
}

// gateState is how far a gate got.
type gateState int

const (
	gateWaiting  gateState = iota // not run yet: the call has not had its turn
	gateChecked                   // the lease held, nothing journaled (a call that is not journaled)
	gateRecorded                  // the intent was recorded
	gateRefused                   // stale, or the store failed: refusal holds the answer
	gateReplayed                  // journaled already: refusal holds the replayed answer
	gateBusy                      // an identical call of this gateway is in flight: wait for it, then run again
)

// gate checks the fence and records the intent of one call when the call
// may leave (see handle). It runs on the goroutine that sends the call, at
// most once to effect: a second run (a not-dispatched try sent again)
// passes at once.
type gate struct {
	g         *Gateway
	ctx       context.Context
	id        intake.Identity
	method    string
	journaled bool        // record an intent for call, else only check the lease
	call      intake.Call // when journaled
	state     gateState
	refusal   answer // when refused or replayed

	leave func() // gives back the entry's flight (flight.go); nil when not held
	waits int    // how often the call waited for an identical call in flight
}

// errGateRefused is what a gate's refusal returns to the transport.
var errGateRefused = errors.New("gateway: the call was refused at its turn")

func (gt *gate) run() error {
	switch gt.state {
	case gateChecked, gateRecorded:
		return nil
	case gateRefused, gateReplayed:
		return errGateRefused
	}
	g, ctx := gt.g, gt.ctx
	now := g.cfg.Test.Now()
	if !gt.journaled {
		owns, err := g.admits(ctx, gt.id, now)
		switch {
		case err != nil:
			gt.refuse(gateRefused, telegramError(StatusNotDispatched, wire.OutcomeNotDispatched,
				"Service Unavailable: tgrelay: the store could not check the attempt's lease; nothing was sent: "+g.redact(err.Error()), 0))
		case !owns:
			gt.refuse(gateRefused, staleAnswer(gt.id))
		default:
			gt.state = gateChecked
			return nil
		}
		return errGateRefused
	}
	// An earlier attempt's identical call may be at Telegram, or its
	// outcome on its way to the store: the entry would read pending. The
	// call waits for it (outside the limiter: the turn is given back
	// uncounted), so it finds what happened.
	if gt.leave == nil {
		leave, busy := g.flight.take(outcomeKey{gt.id.UpdateID, gt.call})
		if busy != nil && gt.waits < maxFlightWaits {
			gt.state = gateBusy
			gt.waits++
			return errGateRefused
		}
		gt.leave = leave
	}
	entry, intent, err := g.journal.RecordIntent(ctx, gt.id, gt.call, now)
	if err != nil || intent != intake.IntentRecorded {
		gt.exitFlight() // the entry does not wait on this call
	}
	switch {
	case err != nil:
		gt.refuse(gateRefused, telegramError(StatusNotDispatched, wire.OutcomeNotDispatched,
			"Service Unavailable: tgrelay: the journal could not record the call; nothing was sent: "+g.redact(err.Error()), 0))
	case intent == intake.IntentStale:
		gt.refuse(gateRefused, staleAnswer(gt.id))
	case intent == intake.IntentJournaled:
		gt.refuse(gateReplayed, replay(entry))
	default:
		gt.state = gateRecorded
		if h := g.cfg.Test.AfterIntent; h != nil {
			h(gt.method)
		}
		return nil
	}
	return errGateRefused
}

func (gt *gate) refuse(s gateState, a answer) { gt.state, gt.refusal = s, a }

// exitFlight gives back the entry's flight, if gt holds it: the entry no
// longer waits on this call.
func (gt *gate) exitFlight() {
	if gt.leave != nil {
		gt.leave()
		gt.leave = nil
	}
}

// awaitFlight waits, before the call asks for its turn, while an identical
// call of this gateway holds the entry (flight.go); it returns ctx's cause
// if ctx ends first. It readies a busy gt to run again. A call gives way
// (a wait here, or a turn given back) at most maxFlightWaits times in all.
func (gt *gate) awaitFlight(ctx context.Context) error {
	counted := gt.state == gateBusy // the turn given back counted it
	if counted {
		gt.state = gateWaiting
	}
	if !gt.journaled || gt.leave != nil || !counted && gt.waits >= maxFlightWaits {
		return nil
	}
	ch := gt.g.flight.busy(outcomeKey{gt.id.UpdateID, gt.call})
	if ch == nil {
		return nil
	}
	if !counted {
		gt.waits++
	}
	var onWait func()
	if h := gt.g.cfg.Test.OutcomeWait; h != nil {
		onWait = func() { h(gt.method) }
	}
	if !waitFlight(ctx, ch, onWait) {
		return fmt.Errorf("waiting for an identical call in flight: %w", context.Cause(ctx))
	}
	return nil
}

// admits reports whether id may make a call that is not journaled at now:
// with a journal, under the same rule as its intents (a live lease, or
// the tail of the update id completed; see [intake.JournalStore]); without
// one, only under a live lease, since a tail's calls could not be replayed.
func (g *Gateway) admits(ctx context.Context, id intake.Identity, now time.Time) (bool, error) {
	if g.journal != nil {
		return g.journal.Admits(ctx, id, now)
	}
	return g.cfg.Store.Owns(ctx, id, now)
}

// release undoes the intent of a try that did not leave (err says why):
// its entry is journaled not dispatched and the gate made to record it
// again at the next try's turn, so that a crash while that try waits
// leaves nothing pending. When the outcome cannot be written the intent
// stands and the next try passes at once, as it always may.
func (gt *gate) release(err error) {
	switch gt.state {
	case gateChecked:
		gt.state = gateWaiting // check the lease again at the next turn
	case gateRecorded:
		res := intake.CallResult{Outcome: intake.CallNotDispatched, Body: []byte(`{"ok":false,"error_code":503,"description":"tgrelay: not dispatched: ` +
			jsonEscape(gt.g.redact(err.Error())) + `"}`)}
		if gt.g.recordOutcome(gt.ctx, gt.id, gt.method, gt.call, res, wire.OutcomeNotDispatched, false) {
			gt.state = gateWaiting
			gt.exitFlight() // the entry is free: an identical call may send it
		}
	}
}

// jsonEscape returns s escaped for a JSON string, without the quotes.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// recordOutcome journals res as the outcome of call, within outcomeBound
// even after the app stopped waiting, and reports whether it applied. An
// outcome written after the answer (later) may wait for the store's next
// write to share its commit, when the store can
// ([intake.JournalStore.RecordOutcomeDeferred]).
func (g *Gateway) recordOutcome(ctx context.Context, id intake.Identity, method string, call intake.Call, res intake.CallResult, outcome wire.Outcome, later bool) bool {
	if h := g.cfg.Test.BeforeOutcome; h != nil {
		h(method)
	}
	record := g.journal.RecordOutcome
	if later {
		record = g.journal.RecordOutcomeDeferred
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeBound)
	ok, err := record(rctx, id, call, res, g.cfg.Test.Now())
	cancel()
	if err != nil || !ok {
		// The entry stays pending, which a later attempt reads as unknown:
		// safe, never a second send.
		g.cfg.Logger.Warn("gateway: outcome not journaled; the call counts as unknown for later attempts",
			"update_id", id.UpdateID, "attempt", id.Attempt, "method", g.shownMethod(method), "outcome", string(outcome),
			"applied", ok, "error", errString(err, g.redact))
	}
	return ok
}

// Close waits until the outcomes still being journaled after their calls
// were answered are recorded, or until ctx ends (then the error wraps
// [ErrOutcomesPending] and ctx's error; the writes go on, each within its
// bound), as the Close(ctx) of [intake.Runner] and relay.Relay drains.
// From its call on, every outcome is recorded before its call is answered,
// so the gateway stays usable: calls still running, such as a draining
// handler's, keep their guarantees. Call it before closing the store. Close
// is idempotent. A Gateway has no Start: it works from [New] on.
func (g *Gateway) Close(ctx context.Context) error {
	return g.outcomes.shutdown(ctx)
}

func errString(err error, redact func(string) string) string {
	if err == nil {
		return ""
	}
	return redact(err.Error())
}

func staleAnswer(id intake.Identity) answer {
	return telegramError(StatusStale, wire.OutcomeStale, fmt.Sprintf(
		"Conflict: tgrelay: attempt %d of update %d no longer holds its lease (it expired, the update was claimed again, or the attempt ended without completing it); nothing was sent",
		id.Attempt, id.UpdateID), 0)
}

// replay answers a call from its journal entry.
func replay(e intake.JournalEntry) answer {
	var a answer
	if e.Outcome == intake.CallAnswered {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		a = answer{status: e.Status, header: h, body: e.Body, outcome: wire.OutcomeAnswered}
	} else {
		a = telegramError(StatusUnknown, wire.OutcomeUnknown, fmt.Sprintf(
			"Bad Gateway: tgrelay: attempt %d of this update already made this call and its outcome is unknown (%s); it may have reached Telegram, so it is not sent again",
			e.Attempt, e.Outcome), 0)
	}
	a.header.Set(HeaderReplayed, "true")
	a.replayed = true
	return a
}

// readOnly reports whether a method only reads (getMe, getChat, getFile…):
// such calls are fenced but not journaled, since sending them again has no
// effect and a replayed answer could be stale.
func readOnly(method string) bool {
	return method == "file" || len(method) > 3 && strings.EqualFold(method[:3], "get")
}

// notDispatched reports whether err proves the request never left: by
// botapi.Classify's rule, one shared with every sender, a not-dispatched
// mark (transport's *NotDispatchedError, throttle's body errors) and
// nothing in the error tree that says or may mean it left.
func notDispatched(err error) bool {
	return botapi.Classify(err).Reason == botapi.ReasonNotDispatched
}

// transportFor returns the transport c goes through, nil when it needs the
// stream transport and there is none.
func (g *Gateway) transportFor(c *call) http.RoundTripper {
	if !c.complete || c.streamAnswer && g.cfg.StreamTransport != nil {
		return g.cfg.StreamTransport
	}
	return g.cfg.Transport
}

// send hands c to the transport, again while it was not dispatched, at most
// MaxSendTries times.
func (g *Gateway) send(ctx context.Context, c *call) answer { return g.sendWith(ctx, c, nil) }

// sendWith is send with gt, when not nil, run before each try leaves: by
// the transport once the call has its turn when the transport runs
// [throttle.WithBeforeSend] functions, else just before the try is handed
// to it. A try that gt refuses ends the send. A try that did not leave
// releases gt's intent, so a later try (or attempt) records it again when
// its turn comes.
func (g *Gateway) sendWith(ctx context.Context, c *call, gt *gate) answer {
	rt := g.transportFor(c)
	if rt == nil {
		return telegramError(http.StatusRequestEntityTooLarge, wire.OutcomeRefused, fmt.Sprintf(
			"Request Entity Too Large: tgrelay: a body above %d bytes needs the gateway's stream transport, which is not configured", g.cfg.MaxBufferedBody), 0)
	}
	var lastErr error
	tries := 0
	for tries < g.cfg.MaxSendTries {
		if tries > 0 {
			if c.rest != nil && c.rest.read > 0 {
				break // part of a streamed body is gone: it cannot be sent again
			}
			if err := backoff.Sleep(ctx, g.retry.Delay(tries)); err != nil {
				break
			}
		}
		if gt != nil {
			if err := gt.awaitFlight(ctx); err != nil {
				lastErr = err
				break
			}
		}
		// The call leaves once it has its turn (through a throttle
		// transport) or now (through another): unless its app has gone,
		// and, for a fenced call, if its gate lets it.
		leave := func() error {
			if c.leash != nil {
				if err := c.leash.leave(); err != nil {
					return err
				}
			}
			if gt != nil {
				return gt.run()
			}
			return nil
		}
		tctx := ctx
		if runsBeforeSend(rt) {
			tctx = throttle.WithBeforeSend(ctx, leave)
		} else if err := leave(); err != nil {
			if gt != nil && gt.state == gateBusy {
				continue // nothing left: wait for the identical call
			}
			lastErr = err
			break
		}
		tries++
		req, err := g.newRequest(tctx, c)
		if err != nil {
			return telegramError(http.StatusBadRequest, wire.OutcomeRefused, "Bad Request: tgrelay: "+g.redact(err.Error()), 0)
		}
		span := g.startTry(ctx, c, tries)
		resp, err := rt.RoundTrip(req)
		g.endTry(span, resp, err)
		if gt != nil && gt.state == gateBusy {
			// Nothing left, and the turn did not count: not a try. Wait
			// for the identical call outside the limiter.
			tries--
			continue
		}
		if gt != nil && (gt.state == gateRefused || gt.state == gateReplayed) {
			if resp != nil {
				resp.Body.Close()
			}
			break // the caller answers with gt's refusal
		}
		if err == nil {
			a := g.readAnswer(resp, c)
			a.tries = tries
			return a
		}
		lastErr = err
		if !notDispatched(err) {
			a := telegramError(StatusUnknown, wire.OutcomeUnknown,
				"Bad Gateway: tgrelay: the call may have reached Telegram, but no answer came back ("+g.redact(err.Error())+"); it is not sent again", 0)
			a.tries = tries
			return a
		}
		if gt != nil {
			gt.release(err)
		}
		if c.leash != nil {
			c.leash.back() // waiting again: the app's going stops it
		}
	}
	desc := "Service Unavailable: tgrelay: the call could not be sent and never left; sending it again is safe"
	if lastErr != nil {
		desc += " (" + g.redact(lastErr.Error()) + ")"
	}
	a := telegramError(StatusNotDispatched, wire.OutcomeNotDispatched, desc, 1)
	a.tries = tries
	return a
}

func (g *Gateway) newRequest(ctx context.Context, c *call) (*http.Request, error) {
	var body io.Reader
	if c.complete {
		if len(c.prefix) > 0 {
			body = bytes.NewReader(c.prefix)
		}
	} else {
		body = io.MultiReader(bytes.NewReader(c.prefix), c.rest)
	}
	req, err := http.NewRequestWithContext(ctx, c.httpMethod, c.upstream, body)
	if err != nil {
		return nil, errors.New("the call's URL is malformed")
	}
	if c.complete {
		prefix := c.prefix
		req.ContentLength = int64(len(prefix))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(prefix)), nil }
		if len(prefix) == 0 {
			req.Body, req.GetBody = http.NoBody, nil
		}
	} else {
		req.ContentLength = c.contentLength
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	return req, nil
}

// maxAnswer bounds a buffered answer: the journal's bound.
const maxAnswer = intake.MaxJournalBody

// readAnswer turns Telegram's (or the limiter's) answer into the app's.
//
// It is the one place an upstream answer becomes the app's (and so the
// journal's and the replayed one's), and it keeps the token out of what
// is not Telegram's word. Something in front of Telegram may quote the
// request's URL, and so the token, in its own answer: a forward proxy's
// error page (a plain-http API root through a proxy is asked for its
// absolute URL, with no CONNECT tunnel whose refusal the transports report
// by status alone), a reverse proxy's 404. The headers passed on are
// masked; an answer that is not Telegram's JSON and quotes the token
// reaches the app with the token masked; an error answer (not 2xx) is
// never streamed unread, not even a file's: Telegram's refusals are small
// JSON, and one too large to read is not Telegram's and is answered
// unknown, status only, as a 5xx page is.
func (g *Gateway) readAnswer(resp *http.Response, c *call) answer {
	h := http.Header{}
	for _, k := range []string{"Content-Type", "Content-Length", "Retry-After", wire.HeaderOutcome, "Content-Disposition", "Last-Modified"} {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, g.redact(v))
		}
	}
	a := answer{status: resp.StatusCode, header: h, outcome: wire.OutcomeAnswered}
	// The upstream's own outcome header is believed only where believing
	// it cannot send a call twice: anyone upstream may set it (a proxy, a
	// hostile server, a tgrelay gateway in front of Telegram). Its unknown
	// is kept; its throttled only on a 429 refusal in Telegram's JSON,
	// which says the same as the limiter's own 429 (see below); any other
	// value is dropped, so a success cannot pass for a call never sent.
	upstream := wire.OutcomeOf(resp.Header)
	h.Del(wire.HeaderOutcome)
	if upstream == wire.OutcomeUnknown {
		a.outcome = wire.OutcomeUnknown
		h.Set(wire.HeaderOutcome, string(upstream))
	}
	if c.streamAnswer && resp.StatusCode/100 == 2 {
		a.stream = resp.Body
		h.Del("Content-Length")
		if resp.ContentLength >= 0 {
			h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		}
		return a
	}
	h.Del("Content-Length")
	b, err := readall.Bounded(resp.Body, resp.ContentLength, maxAnswer+1)
	if err != nil {
		resp.Body.Close()
		u := telegramError(StatusUnknown, wire.OutcomeUnknown,
			"Bad Gateway: tgrelay: Telegram's answer broke off ("+g.redact(err.Error())+"); the call may have taken effect and is not sent again", 0)
		return u
	}
	a.body = b
	// "ok" is read once, where it decides something: in an answer that is
	// not a success.
	shaped, success := false, resp.StatusCode/100 == 2
	if !success {
		var ok bool
		ok, shaped = telegramOK(b)
		a.refusal = shaped && !ok
	}
	if upstream == wire.OutcomeThrottled && resp.StatusCode == http.StatusTooManyRequests && a.refusal {
		a.outcome = wire.OutcomeThrottled
		h.Set(wire.HeaderOutcome, string(upstream))
	}
	// Telegram's own 429, not a proxy's page: only it says Telegram's
	// limits were hit.
	a.tg429 = resp.StatusCode == http.StatusTooManyRequests && a.outcome != wire.OutcomeThrottled && a.refusal
	if (resp.StatusCode >= 500 || !success && len(b) > maxAnswer) && !shaped {
		resp.Body.Close()
		return telegramError(StatusUnknown, wire.OutcomeUnknown, fmt.Sprintf(
			"Bad Gateway: tgrelay: an answer that is not Telegram's (HTTP %d without its JSON body, as a proxy's error page); the call may have taken effect and is not sent again",
			resp.StatusCode), 0)
	}
	if len(b) > maxAnswer {
		a.stream = resp.Body // the rest follows; too large to journal
		return a
	}
	resp.Body.Close()
	// Most answers hold nothing to mask, and a success is parsed only when
	// it does, to tell Telegram's JSON (passed on verbatim) from a page.
	if masked := g.redact(string(b)); masked != string(b) {
		if success {
			shaped = telegramShaped(b)
		}
		if !shaped {
			a.body = []byte(masked)
		}
	}
	return a
}

// telegramShaped reports whether b is a JSON object with Telegram's "ok".
func telegramShaped(b []byte) bool {
	_, ok := telegramOK(b)
	return ok
}

// telegramOK returns the boolean "ok" of a JSON object b, and whether b
// has one.
func telegramOK(b []byte) (v, ok bool) {
	var env struct {
		OK *bool `json:"ok"`
	}
	if json.Unmarshal(b, &env) != nil || env.OK == nil {
		return false, false
	}
	return *env.OK, true
}
