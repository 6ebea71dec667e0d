package gateway

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/wire"
)

// Tracing (Config.TracerProvider). A call the app makes is a server span
// under the W3C traceparent its request carries (an app that got one with
// its update forward joins the update's trace), or, for a fenced call
// without one, under what Config.TraceParentFunc gives; a webhook reply is a span
// under the forward's; each try that goes to Telegram is a client span
// beneath. No trace context is sent to Telegram. Spans name the method,
// never the URL (it holds the token), the parameters or the answer.

// tracerName names the gateway's tracer.
const tracerName = "github.com/tgrelay/tgrelay/gateway"

// Attribute keys of the gateway's spans.
const (
	attrMethod     = attribute.Key("tgrelay.method")
	attrOutcome    = attribute.Key("tgrelay.outcome")
	attrFenced     = attribute.Key("tgrelay.fenced")
	attrReplayed   = attribute.Key("tgrelay.replayed")
	attrTry        = attribute.Key("tgrelay.try")
	attrHTTPStatus = attribute.Key("http.response.status_code")
)

// startCall starts the span of one call the app made through ServeHTTP, in
// the trace its request's traceparent names, and returns the request's
// context carrying it. Without a TracerProvider it returns r's context and
// nil.
func (g *Gateway) startCall(r *http.Request) (context.Context, trace.Span) {
	if g.tracer == nil {
		return r.Context(), nil
	}
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if f := g.cfg.TraceParentFunc; f != nil && !trace.SpanContextFromContext(ctx).IsValid() {
		if id, ok := requestIdentity(r); ok {
			ctx = f(ctx, id)
		}
	}
	return g.tracer.Start(ctx, "tgrelay gateway", trace.WithSpanKind(trace.SpanKindServer))
}

// requestIdentity returns the attempt identity r carries (its per-attempt
// API root, else its identity headers), as serve reads it, when it carries
// a well-formed one.
func requestIdentity(r *http.Request) (intake.Identity, bool) {
	if rest, ok := strings.CutPrefix(r.URL.Path, wire.AttemptPrefix); ok {
		if parts := strings.SplitN(rest, "/", 4); len(parts) == 4 {
			if id, err := parseIdentity(parts[0], parts[1], parts[2]); err == nil {
				return id, true
			}
		}
	}
	if id, present, err := identityFromHeader(r.Header); present && err == nil {
		return id, true
	}
	return intake.Identity{}, false
}

// startReply starts the span of one webhook reply, under ctx's span (the
// forward's); nil without a TracerProvider.
func (g *Gateway) startReply(ctx context.Context) (context.Context, trace.Span) {
	if g.tracer == nil {
		return ctx, nil
	}
	return g.tracer.Start(ctx, "tgrelay reply", trace.WithSpanKind(trace.SpanKindInternal))
}

// endCall names a call's span after its method and ends it with its
// answer. A nil span is no tracing.
func endCall(s trace.Span, kind, method string, a answer, fenced bool) {
	if s == nil {
		return
	}
	if !botapi.ValidMethod(method) && method != "file" {
		method = "invalid"
	}
	s.SetName("tgrelay " + kind + " " + method)
	s.SetAttributes(attrMethod.String(method), attrOutcome.String(string(a.outcome)), attrHTTPStatus.Int(a.status),
		attrFenced.Bool(fenced), attrReplayed.Bool(a.replayed))
	if a.outcome == wire.OutcomeUnknown || a.outcome == wire.OutcomeNotDispatched {
		s.SetStatus(codes.Error, string(a.outcome))
	}
	s.End()
}

// startTry starts the span of one try of c to Telegram, under ctx's span;
// nil without a TracerProvider. The request is built from ctx but never
// carries its trace context.
func (g *Gateway) startTry(ctx context.Context, c *call, try int) trace.Span {
	if g.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil // a call outside any trace starts none
	}
	method := g.shownMethod(c.method)
	_, s := g.tracer.Start(ctx, "telegram "+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrMethod.String(method), attrTry.Int(try)))
	return s
}

// endTry ends a try's span: with Telegram's status, or with the outcome a
// failed try had (err, redacted, says why).
func (g *Gateway) endTry(s trace.Span, resp *http.Response, err error) {
	if s == nil {
		return
	}
	switch {
	case err == nil:
		s.SetAttributes(attrHTTPStatus.Int(resp.StatusCode))
		if resp.StatusCode >= 500 {
			s.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
		}
	case notDispatched(err):
		s.SetAttributes(attrOutcome.String(string(wire.OutcomeNotDispatched)))
		s.SetStatus(codes.Error, g.redact(err.Error()))
	default:
		s.SetAttributes(attrOutcome.String(string(wire.OutcomeUnknown)))
		s.SetStatus(codes.Error, g.redact(err.Error()))
	}
	s.End()
}
