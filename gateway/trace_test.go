package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/wire"
)

// headerSpy records the trace headers of every request sent upstream.
type headerSpy struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (s *headerSpy) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req.Header.Get("Traceparent")+req.Header.Get("Tracestate"))
	s.mu.Unlock()
	return s.next.RoundTrip(req)
}

// endedSpans is a span processor that passes on the name of every span
// that ends.
type endedSpans chan string

func (c endedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c endedSpans) OnEnd(s sdktrace.ReadOnlySpan)                   { c <- s.Name() }
func (c endedSpans) Shutdown(context.Context) error                  { return nil }
func (c endedSpans) ForceFlush(context.Context) error                { return nil }

// await waits for the span named name to end.
func (c endedSpans) await(t *testing.T, name string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case n := <-c:
			if n == name {
				return
			}
		case <-timeout:
			t.Fatalf("span %q did not end", name)
		}
	}
}

// TestTraceCall: a call that carries a W3C traceparent is a server span
// under it, Telegram's try a client span under the call, named by the
// method and holding no token; Telegram gets no trace context.
func TestTraceCall(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	ended := make(endedSpans, 16)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(ended))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	spy := &headerSpy{}
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
		c.TracerProvider = tp
		spy.next = c.Transport
		c.Transport = spy
	}})

	ctx, app := tp.Tracer("app").Start(t.Context(), "app handler")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/bot"+f.tg.Token+"/sendMessage",
		bytes.NewBufferString(fmt.Sprintf(`{"chat_id":%d,"text":"traced"}`, f.chat.ID)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Tracestate", "app=1")
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if r := do(t, req); r.status != http.StatusOK {
		t.Fatalf("sendMessage = %d %s", r.status, r.body)
	}
	app.End()
	// The call's span ends once its answer is written, which may be after
	// the app has read it.
	ended.await(t, "tgrelay gateway sendMessage")

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
	}
	call, try := spans["tgrelay gateway sendMessage"], spans["telegram sendMessage"]
	if call.Name == "" || try.Name == "" {
		t.Fatalf("spans %v; want the call and Telegram's try", exp.GetSpans())
	}
	if call.Parent.SpanID() != app.SpanContext().SpanID() || call.SpanContext.TraceID() != app.SpanContext().TraceID() || !call.Parent.IsRemote() {
		t.Errorf("the call's parent is %v, want the app's span %v from its traceparent", call.Parent, app.SpanContext())
	}
	if try.Parent.SpanID() != call.SpanContext.SpanID() {
		t.Errorf("Telegram's try's parent is %s, want the call %s", try.Parent.SpanID(), call.SpanContext.SpanID())
	}
	if call.SpanKind != trace.SpanKindServer || try.SpanKind != trace.SpanKindClient {
		t.Errorf("kinds: call %v, try %v; want server, client", call.SpanKind, try.SpanKind)
	}
	for _, kv := range call.Attributes {
		if kv.Key == "tgrelay.outcome" && kv.Value.AsString() != string(wire.OutcomeAnswered) {
			t.Errorf("the call's outcome attribute is %q, want answered", kv.Value.AsString())
		}
	}
	_, half, _ := strings.Cut(f.tg.Token, ":")
	if text := fmt.Sprintf("%+v", exp.GetSpans()); strings.Contains(text, half) {
		t.Errorf("a span holds the token: %s", text)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.seen) != 1 || spy.seen[0] != "" {
		t.Errorf("Telegram got trace headers %q; want none", spy.seen)
	}
}
