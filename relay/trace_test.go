package relay_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/wire"
)

// tracedRun is one update through a relay traced into an in-memory
// exporter, handled by an app with its own tracer provider (its own
// process, as it were) that reads the forward's traceparent, makes a span
// of its own and calls the gateway under it.
type tracedRun struct {
	spans    tracetest.SpanStubs
	token    string
	updateID int64
}

// byName returns the one span named name, failing the test otherwise.
func (tr tracedRun) byName(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range tr.spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %s", len(found), name, tr.names())
	}
	return found[0]
}

func (tr tracedRun) names() string {
	var ns []string
	for _, s := range tr.spans {
		ns = append(ns, fmt.Sprintf("%s(%s<-%s)", s.Name, s.SpanContext.SpanID(), s.Parent.SpanID()))
	}
	return strings.Join(ns, ", ")
}

// runTraced sends one message through a relay (webhook or polling)
// whose provider uses gen (nil: the SDK's own ids) and returns the spans
// once the update's receive, forward and the app's call are recorded.
func runTraced(t *testing.T, webhook bool, gen sdktrace.IDGenerator) tracedRun {
	t.Helper()
	return runTracedApp(t, webhook, gen, appPropagates)
}

// How the app of runTracedApp answers.
type appKind int

const (
	appPropagates  appKind = iota // calls the gateway under its span's traceparent
	appReplies                    // answers with a webhook reply instead
	appOwnTraceOff                // calls the gateway with no traceparent
)

// runTracedApp is runTraced with an app of the given kind.
func runTracedApp(t *testing.T, webhook bool, gen sdktrace.IDGenerator, kind appKind) tracedRun {
	t.Helper()
	srv := fakeTelegram(t)
	u := srv.NewUser("Ann")
	chat, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSyncer(exp)}
	if gen != nil {
		opts = append(opts, sdktrace.WithIDGenerator(gen))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	appTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = appTP.Shutdown(t.Context()) })
	appTracer := appTP.Tracer("app")
	prop := propagation.TraceContext{}

	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := appTracer.Start(ctx, "app handle update")
		defer span.End()
		if kind == appReplies {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"method":"sendMessage","chat_id":%d,"text":"echo"}`, chat.ID)
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.Header.Get(wire.HeaderAPIRoot)+"/bot"+srv.Token+"/sendMessage",
			bytes.NewBufferString(fmt.Sprintf(`{"chat_id":%d,"text":"echo"}`, chat.ID)))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if kind == appPropagates {
			prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("send through the gateway: %v", err)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the gateway answered %d", resp.StatusCode)
		}
	}))
	t.Cleanup(app.Close)

	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), logs, rec)
	cfg.Forward = forward.Config{URL: app.URL}
	cfg.Gateway = relay.GatewayConfig{Listener: listen(t)}
	cfg.TracerProvider = tp
	if webhook {
		hook := listen(t)
		cfg.Poll, cfg.PollTimeout = false, 0
		cfg.Listener, cfg.Secret, cfg.TakeoverFrom = hook, testSecret, hookowner.HostNone
		cfg.PublicURL = "http://" + hook.Addr().String() + "/telegram"
	}
	start(t, cfg)
	up, err := srv.SendText(chat, u, "hi")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the update to settle", func() bool { return rec.count("settled") >= 1 })
	// The receive is recorded once its answer is decided, which may come
	// after the update was handled.
	testkit.WaitFor(t, "the receive span", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "tgrelay receive" {
				return true
			}
		}
		return false
	})
	if n := len(srv.MessagesTo(chat.ID)); n != 1 {
		t.Fatalf("the chat got %d messages, want the app's reply", n)
	}
	assertNoSecrets(t, "the update's spans", fmt.Sprintf("%+v", exp.GetSpans()), srv.Token)
	return tracedRun{spans: exp.GetSpans(), token: srv.Token, updateID: up.ID}
}

// intAttr returns the int value of attribute k of s, or -1.
func intAttr(s tracetest.SpanStub, k attribute.Key) int64 {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value.AsInt64()
		}
	}
	return -1
}

// assertJoined checks the chain below the update's common parent: the
// forward, the app's span under it, the app's gateway call under that, and
// Telegram's try under the call, all in the one trace.
func assertJoined(t *testing.T, tr tracedRun, parent trace.SpanID) {
	t.Helper()
	fwd := tr.byName(t, "tgrelay forward")
	appSpan := tr.byName(t, "app handle update")
	call := tr.byName(t, "tgrelay gateway sendMessage")
	try := tr.byName(t, "telegram sendMessage")
	traceID := fwd.SpanContext.TraceID()
	for _, s := range tr.spans {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("span %q is in trace %s, want the update's one trace %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
	}
	for _, link := range []struct {
		child, parent string
		got, want     trace.SpanID
	}{
		{"the forward", "the update's parent", fwd.Parent.SpanID(), parent},
		{"the app's span", "the forward", appSpan.Parent.SpanID(), fwd.SpanContext.SpanID()},
		{"the gateway call", "the app's span", call.Parent.SpanID(), appSpan.SpanContext.SpanID()},
		{"Telegram's try", "the gateway call", try.Parent.SpanID(), call.SpanContext.SpanID()},
	} {
		if link.got != link.want {
			t.Errorf("%s's parent is %s, want %s (%s); spans: %s", link.child, link.got, link.parent, link.want, tr.names())
		}
	}
	if got := intAttr(fwd, "tgrelay.update_id"); got != tr.updateID {
		t.Errorf("forward span's update id = %d, want %d", got, tr.updateID)
	}
	if got := intAttr(fwd, "tgrelay.attempt"); got != 1 {
		t.Errorf("forward span's attempt = %d, want 1", got)
	}
	if got := intAttr(try, "http.response.status_code"); got != http.StatusOK {
		t.Errorf("Telegram's try span has status %d, want 200", got)
	}
	if fwd.SpanKind != trace.SpanKindClient || call.SpanKind != trace.SpanKindServer || try.SpanKind != trace.SpanKindClient {
		t.Errorf("span kinds: forward %v, gateway call %v, Telegram try %v; want client, server, client", fwd.SpanKind, call.SpanKind, try.SpanKind)
	}
}

// TestTraceOneUpdate: with relay.TraceIDGenerator in its provider, an update
// received by webhook or by polling is one trace whose root is its
// receive: the store beneath it, the attempt's forward beneath it, the
// app's own span (joined through the forward's traceparent) beneath the
// forward, the app's gateway call beneath the app's span (joined through
// the traceparent it sent back) and Telegram's answer beneath the call.
func TestTraceOneUpdate(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name    string
		webhook bool
		kind    trace.SpanKind
	}{{"webhook", true, trace.SpanKindServer}, {"poll", false, trace.SpanKindConsumer}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			tr := runTraced(t, mode.webhook, relay.TraceIDGenerator{})
			recv := tr.byName(t, "tgrelay receive")
			store := tr.byName(t, "tgrelay store")
			if recv.Parent.IsValid() {
				t.Errorf("the receive has parent %s; want it the trace's root", recv.Parent.SpanID())
			}
			if recv.SpanKind != mode.kind {
				t.Errorf("the receive's kind is %v, want %v", recv.SpanKind, mode.kind)
			}
			if store.Parent.SpanID() != recv.SpanContext.SpanID() {
				t.Errorf("the store's parent is %s, want the receive %s", store.Parent.SpanID(), recv.SpanContext.SpanID())
			}
			if got := intAttr(recv, "tgrelay.update_id"); got != tr.updateID {
				t.Errorf("receive span's update id = %d, want %d", got, tr.updateID)
			}
			if store.StartTime.Before(recv.StartTime) || store.EndTime.After(recv.EndTime) {
				t.Errorf("the store ran %v..%v, outside its receive %v..%v", store.StartTime, store.EndTime, recv.StartTime, recv.EndTime)
			}
			assertJoined(t, tr, recv.SpanContext.SpanID())
		})
	}
}

// TestTraceWithoutIDGenerator: with a provider of the SDK's own ids, the
// update is still one trace; the receive and the forward are siblings
// under the update's parent, which no span carries.
func TestTraceWithoutIDGenerator(t *testing.T) {
	t.Parallel()
	tr := runTraced(t, false, nil)
	recv := tr.byName(t, "tgrelay receive")
	if !recv.Parent.IsValid() || !recv.Parent.IsRemote() {
		t.Fatalf("the receive's parent is %v; want the update's remote parent", recv.Parent)
	}
	for _, s := range tr.spans {
		if s.SpanContext.SpanID() == recv.Parent.SpanID() {
			t.Errorf("span %q carries the update's parent id; no span should", s.Name)
		}
	}
	assertJoined(t, tr, recv.Parent.SpanID())
}

// TestTraceWebhookReply: a webhook reply in the app's answer is a span
// under the attempt's forward, with Telegram's try beneath it.
func TestTraceWebhookReply(t *testing.T) {
	t.Parallel()
	tr := runTracedApp(t, false, relay.TraceIDGenerator{}, appReplies)
	fwd := tr.byName(t, "tgrelay forward")
	reply := tr.byName(t, "tgrelay reply sendMessage")
	try := tr.byName(t, "telegram sendMessage")
	if reply.Parent.SpanID() != fwd.SpanContext.SpanID() || try.Parent.SpanID() != reply.SpanContext.SpanID() {
		t.Errorf("the reply's parent is %s (want the forward %s), the try's %s (want the reply %s); spans: %s",
			reply.Parent.SpanID(), fwd.SpanContext.SpanID(), try.Parent.SpanID(), reply.SpanContext.SpanID(), tr.names())
	}
	if reply.SpanContext.TraceID() != tr.byName(t, "tgrelay receive").SpanContext.TraceID() {
		t.Error("the reply is outside the update's trace")
	}
}

// TestTraceRedeliveredUpdate: Telegram delivering an update again (its
// first 200 was lost) adds a receive to the update's trace, under the
// first receive, which stays the one root: no two spans share an id.
func TestTraceRedeliveredUpdate(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(relay.TraceIDGenerator{}))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), logs, rec)
	cfg.Poll, cfg.PollTimeout = false, 0
	cfg.Listener, cfg.Secret = listen(t), testSecret
	cfg.TracerProvider = tp
	r := start(t, cfg)
	body := `{"update_id":4242,"message":{"message_id":1,"date":1,"chat":{"id":7,"type":"private"},"text":"hi"}}`
	for range 2 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.WebhookURL(), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", testSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("delivery answered %d, want 200", resp.StatusCode)
		}
	}
	testkit.WaitFor(t, "the update to settle", func() bool { return rec.count("settled") >= 1 })
	tr := tracedRun{spans: exp.GetSpans(), updateID: 4242}
	var roots, others []tracetest.SpanStub
	ids := map[trace.SpanID]string{}
	for _, s := range tr.spans {
		if prev, dup := ids[s.SpanContext.SpanID()]; dup {
			t.Errorf("spans %q and %q share the id %s", prev, s.Name, s.SpanContext.SpanID())
		}
		ids[s.SpanContext.SpanID()] = s.Name
		if s.Name != "tgrelay receive" {
			continue
		}
		if s.Parent.IsValid() {
			others = append(others, s)
		} else {
			roots = append(roots, s)
		}
	}
	if len(roots) != 1 || len(others) != 1 {
		t.Fatalf("%d root receives and %d others, want 1 and 1; spans: %s", len(roots), len(others), tr.names())
	}
	if others[0].Parent.SpanID() != roots[0].SpanContext.SpanID() || others[0].SpanContext.TraceID() != roots[0].SpanContext.TraceID() {
		t.Errorf("the second receive hangs under %s, want the first %s", others[0].Parent.SpanID(), roots[0].SpanContext.SpanID())
	}
	for _, kv := range others[0].Attributes {
		if kv.Key == "tgrelay.acceptance" && kv.Value.AsString() != "duplicate" {
			t.Errorf("the second receive's acceptance is %q, want duplicate", kv.Value.AsString())
		}
	}
	assertJoinedForward(t, tr, roots[0].SpanContext.SpanID())
}

// assertJoinedForward checks the forward hangs under parent.
func assertJoinedForward(t *testing.T, tr tracedRun, parent trace.SpanID) {
	t.Helper()
	if fwd := tr.byName(t, "tgrelay forward"); fwd.Parent.SpanID() != parent {
		t.Errorf("the forward's parent is %s, want %s", fwd.Parent.SpanID(), parent)
	}
}

// TestTraceAppWithoutTraceparent: an app that sends no traceparent with
// its gateway call still has the call, and Telegram's answer, in the
// update's trace: beside the forward, under the receive (the call is
// fenced by the attempt root it used).
func TestTraceAppWithoutTraceparent(t *testing.T) {
	t.Parallel()
	tr := runTracedApp(t, false, relay.TraceIDGenerator{}, appOwnTraceOff)
	recv := tr.byName(t, "tgrelay receive")
	call := tr.byName(t, "tgrelay gateway sendMessage")
	try := tr.byName(t, "telegram sendMessage")
	if call.SpanContext.TraceID() != recv.SpanContext.TraceID() || call.Parent.SpanID() != recv.SpanContext.SpanID() {
		t.Errorf("the call is in trace %s under %s; want the update's trace %s under the receive %s",
			call.SpanContext.TraceID(), call.Parent.SpanID(), recv.SpanContext.TraceID(), recv.SpanContext.SpanID())
	}
	if try.Parent.SpanID() != call.SpanContext.SpanID() {
		t.Errorf("Telegram's try hangs under %s, want the call %s", try.Parent.SpanID(), call.SpanContext.SpanID())
	}
}
