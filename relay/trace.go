package relay

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/intake"
)

// Tracing (Config.TracerProvider): one trace per update. Its trace id is
// derived from the bot's id and the update's id, so that every span of the
// update lands in it whichever process records it and however long after:
// the receive that recorded it, each attempt's forward, the app's own spans
// (the forward carries W3C traceparent), the app's gateway calls (the
// gateway reads traceparent back) and Telegram's answers to them. No trace
// context is kept in the store.
//
// The spans of an update hang under one span id, also derived. With
// [TraceIDGenerator] in the provider, that is the id of the receive span
// that recorded the update, the root of the trace. Without it, the receive
// is a sibling of the attempts under a parent no span carries.

// tracerName names the relay's tracer.
const tracerName = "github.com/tgrelay/tgrelay/relay"

// Attribute keys of the relay's spans. None holds a URL, a body, a secret
// or a claim id (with the token, a claim id lets a call pass the fence).
const (
	attrUpdateID   = attribute.Key("tgrelay.update_id")
	attrAttempt    = attribute.Key("tgrelay.attempt")
	attrMode       = attribute.Key("tgrelay.receive.mode")
	attrAcceptance = attribute.Key("tgrelay.acceptance")
	attrStore      = attribute.Key("tgrelay.store")
	attrHTTPStatus = attribute.Key("http.response.status_code")
)

// updateRoot returns the trace id of update id of bot, and the span id its
// spans hang under: the first 24 bytes of a SHA-256 of both, never zero.
func updateRoot(bot string, id int64) (trace.TraceID, trace.SpanID) {
	h := sha256.New()
	io.WriteString(h, "tgrelay update trace\x00")
	io.WriteString(h, bot)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(id))
	h.Write(b[:])
	sum := h.Sum(nil)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	if !tid.IsValid() {
		tid[15] = 1
	}
	if !sid.IsValid() {
		sid[7] = 1
	}
	return tid, sid
}

// rootKey is the context key under which the receive span asks a
// [TraceIDGenerator] for its update's ids.
type rootKey struct{}

type rootIDs struct {
	tid trace.TraceID
	sid trace.SpanID
}

// TraceIDGenerator makes the span that records an update the root of the
// update's trace: hand it to the OpenTelemetry SDK
// (sdktrace.WithIDGenerator(relay.TraceIDGenerator{})) of the provider in
// Config.TracerProvider. Every other span gets random ids, as with the SDK's
// own generator. Without it the update's spans still share one trace, under
// a parent span no exporter sees. Its zero value is ready; it is safe for
// concurrent use.
type TraceIDGenerator struct{}

// NewIDs returns the ids of a root span: the update's, when the relay asks
// for them through ctx; random ones otherwise.
func (TraceIDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if ids, ok := ctx.Value(rootKey{}).(rootIDs); ok {
		return ids.tid, ids.sid
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

// NewSpanID returns a random span id.
func (TraceIDGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// tracing holds the relay's tracer; the zero value (no provider) traces
// nothing.
type tracing struct {
	tracer trace.Tracer // nil: no tracing
	bot    string       // the bot's id: the public half of the token
	store  string       // Config.StoreName

	probe    sync.Once
	rootable bool // the provider generates ids with TraceIDGenerator

	// The runner's acceptance of each update a webhook request is
	// handing it, reported during Accept and taken when the request is
	// answered (at most maxAccepts at once; beyond, a receive is taken
	// for a duplicate, which only keeps it from rooting the trace).
	mu       sync.Mutex
	accepted map[int64]intake.Acceptance
}

// maxAccepts bounds the acceptances tracing holds for webhook requests
// being answered.
const maxAccepts = 4096

// noteAccept records the runner's acceptance of update id, for the webhook
// request that hands it over.
func (t *tracing) noteAccept(id int64, a intake.Acceptance) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.accepted == nil {
		t.accepted = map[int64]intake.Acceptance{}
	}
	if len(t.accepted) < maxAccepts {
		t.accepted[id] = a
	}
}

// takeAccept returns and forgets the acceptance of update id noted by its
// request's Accept; [intake.Duplicate] when none was noted.
func (t *tracing) takeAccept(id int64) intake.Acceptance {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.accepted[id]
	if !ok {
		return intake.Duplicate
	}
	delete(t.accepted, id)
	return a
}

func newTracing(tp trace.TracerProvider, token, store string) *tracing {
	if tp == nil {
		return &tracing{}
	}
	bot, _, _ := strings.Cut(token, ":")
	return &tracing{tracer: tp.Tracer(tracerName), bot: bot, store: store}
}

func (t *tracing) on() bool { return t.tracer != nil }

// parent returns ctx under the update's trace: its spans' common parent,
// as a remote span (sampled: the update's spans are kept together).
func (t *tracing) parent(ctx context.Context, id int64) context.Context {
	tid, sid := updateRoot(t.bot, id)
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
}

// callParent puts a fenced gateway call that carries no traceparent (its
// app does not propagate one) in its update's trace, beside the forwards.
func (t *tracing) callParent(ctx context.Context, id intake.Identity) context.Context {
	return t.parent(ctx, id.UpdateID)
}

// canRoot reports whether the provider gives a root span the ids the
// relay asks for (it uses [TraceIDGenerator]). It asks once, with a span
// it never ends, so no exporter sees it.
func (t *tracing) canRoot() bool {
	t.probe.Do(func() {
		want := rootIDs{tid: trace.TraceID{0x7e, 1}, sid: trace.SpanID{0x7e, 1}}
		ctx := context.WithValue(context.Background(), rootKey{}, want)
		_, s := t.tracer.Start(ctx, "tgrelay probe", trace.WithNewRoot())
		sc := s.SpanContext()
		t.rootable = sc.TraceID() == want.tid && sc.SpanID() == want.sid
	})
	return t.rootable
}

// receipt is one update received, as its spans record it.
type receipt struct {
	mode       string // "webhook" or "poll"
	body       []byte
	start      time.Time // the request (or the poll's hand-over) began
	storeStart time.Time // Accept began
	end        time.Time // the answer was decided
	acceptance intake.Acceptance
	err        error
	status     int          // the webhook's answer; zero for polling
	link       []trace.Link // a trace context the request carried
}

// recordReceive records the spans of one receipt, once its outcome is
// known: a receive span (the update's root when the update was newly
// recorded and the provider can root it) with a store span beneath, both
// given their measured times. A body that is not an update has no trace.
func (t *tracing) recordReceive(rc receipt, redact func(string) string) {
	id, err := intake.ParseUpdate(rc.body)
	if err != nil {
		return
	}
	kind := trace.SpanKindServer
	if rc.mode == "poll" {
		kind = trace.SpanKindConsumer
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(rc.start), trace.WithSpanKind(kind), trace.WithLinks(rc.link...),
		trace.WithAttributes(attrUpdateID.Int64(id), attrMode.String(rc.mode))}
	var ctx context.Context
	if rc.err == nil && rc.acceptance == intake.Accepted && t.canRoot() {
		tid, sid := updateRoot(t.bot, id)
		ctx = context.WithValue(context.Background(), rootKey{}, rootIDs{tid, sid})
		opts = append(opts, trace.WithNewRoot())
	} else {
		// A duplicate, a failed store, or a provider that cannot root
		// it: beside the attempts, under the update's parent.
		ctx = t.parent(context.Background(), id)
	}
	ctx, recv := t.tracer.Start(ctx, "tgrelay receive", opts...)
	_, st := t.tracer.Start(ctx, "tgrelay store", trace.WithTimestamp(rc.storeStart),
		trace.WithAttributes(attrStore.String(t.store)))
	if rc.err != nil {
		msg := redact(rc.err.Error())
		st.SetStatus(codes.Error, msg)
		recv.SetStatus(codes.Error, msg)
	} else {
		recv.SetAttributes(attrAcceptance.String(rc.acceptance.String()))
	}
	if rc.status != 0 {
		recv.SetAttributes(attrHTTPStatus.Int(rc.status))
		if rc.status >= 500 && rc.err == nil {
			recv.SetStatus(codes.Error, "answered "+strconv.Itoa(rc.status))
		}
	}
	st.End(trace.WithTimestamp(rc.end))
	recv.End(trace.WithTimestamp(rc.end))
}

// startAttempt starts the span of one attempt's forward, under the
// update's trace; its context carries it to the forward's traceparent and
// to the gateway's webhook replies.
func (t *tracing) startAttempt(ctx context.Context, a intake.Attempt) (context.Context, trace.Span) {
	return t.tracer.Start(t.parent(ctx, a.UpdateID), "tgrelay forward", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrUpdateID.Int64(a.UpdateID), attrAttempt.Int(a.Attempt)))
}

// endAttempt ends an attempt's span with its outcome.
func endAttempt(s trace.Span, err error, redact func(string) string) {
	if err != nil {
		s.SetStatus(codes.Error, redact(err.Error()))
	}
	s.End()
}

// traceAccept is Runner.Accept for polling, recording each update's
// receive.
func (r *Relay) traceAccept(ctx context.Context, body []byte) (intake.Acceptance, error) {
	if !r.tr.on() {
		return r.runner.Accept(ctx, body)
	}
	start := r.now()
	a, err := r.runner.Accept(ctx, body)
	r.tr.recordReceive(receipt{mode: "poll", body: body, start: start, storeStart: start, end: r.now(), acceptance: a, err: err}, r.red.Redact)
	return a, err
}

// traceWebhook wraps the webhook handler h, recording each request's
// receive once it is answered. It keeps the body it read (at most the
// webhook's own bound, which h enforces) for the update's id.
func (r *Relay) traceWebhook(h http.Handler) http.Handler {
	if !r.tr.on() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := r.now()
		tb := &teeBody{ReadCloser: req.Body, now: r.now}
		req.Body = tb
		tw := &answerWriter{ResponseWriter: w, now: r.now}
		h.ServeHTTP(tw, req)
		if !tw.wrote {
			tw.at, tw.code = r.now(), http.StatusOK
		}
		rc := receipt{mode: "webhook", body: tb.buf, start: start, storeStart: tb.eof, end: tw.at, status: tw.code}
		if rc.storeStart.IsZero() {
			rc.storeStart = tw.at
		}
		switch tw.code {
		case http.StatusOK:
			// A duplicate answers 200 too: the runner's own report says
			// which it was (a receive roots the trace only when it added
			// the update, see recordReceive).
			if id, err := intake.ParseUpdate(tb.buf); err == nil {
				rc.acceptance = r.tr.takeAccept(id)
			}
		case http.StatusServiceUnavailable:
			rc.err = errStoreRefused
		default:
			return // not an update this relay recorded or refused to store
		}
		// An incoming trace context (a proxy's) is linked, not followed:
		// the update's own trace is the one its attempts join.
		if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(req.Context(), propagation.HeaderCarrier(req.Header))); sc.IsValid() {
			rc.link = []trace.Link{{SpanContext: sc}}
		}
		r.tr.recordReceive(rc, r.red.Redact)
	})
}

// errStoreRefused stands for the webhook's 503: the store did not record
// the update (the webhook logs why).
var errStoreRefused = storeRefusedError{}

type storeRefusedError struct{}

func (storeRefusedError) Error() string {
	return "the store did not record the update; answered 503 so that Telegram delivers it again"
}

// teeBody keeps what the handler reads of a request body, and when it
// read the end.
type teeBody struct {
	io.ReadCloser
	now func() time.Time
	buf []byte
	eof time.Time
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf = append(b.buf, p[:n]...)
	if err == io.EOF && b.eof.IsZero() {
		b.eof = b.now()
	}
	return n, err
}

// answerWriter records the status of an answer and when it was written.
type answerWriter struct {
	http.ResponseWriter
	now   func() time.Time
	code  int
	at    time.Time
	wrote bool
}

func (w *answerWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.at, w.wrote = code, w.now(), true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
