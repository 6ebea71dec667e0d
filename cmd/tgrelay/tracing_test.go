package main

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

func TestDecideTracing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		flag     string
		env      []string
		on       bool
		endpoint string
		shown    string
		errPart  string
	}{
		{name: "off by default"},
		{name: "off with only a service name", env: []string{"OTEL_SERVICE_NAME=bot"}},
		{name: "the flag", flag: "http://collector:4318", on: true, endpoint: "http://collector:4318/v1/traces", shown: "http://collector:4318"},
		{name: "the flag with a path", flag: "https://c.example/otlp/", on: true, endpoint: "https://c.example/otlp/v1/traces", shown: "https://c.example"},
		{name: "the flag wins over none", flag: "http://c:4318", env: []string{"OTEL_TRACES_EXPORTER=none"}, on: true, endpoint: "http://c:4318/v1/traces", shown: "http://c:4318"},
		{name: "a bad flag", flag: "collector:4318", errPart: "--otlp-endpoint"},
		{name: "the flag with a password", flag: "https://otel:hunter2@c.example:4318", errPart: "--otlp-endpoint has a user name or password"},
		{name: "the flag with a user", flag: "http://otel@c:4318", errPart: "--otlp-endpoint has a user name or password"},
		{name: "the endpoint variable with a password", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://otel:hunter2@c:4318"}, errPart: "OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) has a user name or password"},
		{name: "the endpoint variable", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318"}, on: true, shown: "http://c:4318"},
		{name: "the traces endpoint variable", env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://t:4318/v1/traces"}, on: true, shown: "http://t:4318"},
		{name: "otlp exporter, default endpoint", env: []string{"OTEL_TRACES_EXPORTER=otlp"}, on: true, shown: defaultOTLPEndpoint},
		{name: "none", env: []string{"OTEL_TRACES_EXPORTER=none", "OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318"}},
		{name: "sdk disabled", env: []string{"OTEL_SDK_DISABLED=true", "OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318"}},
		{name: "an unsupported exporter", env: []string{"OTEL_TRACES_EXPORTER=zipkin"}, errPart: "OTEL_TRACES_EXPORTER=zipkin"},
		{name: "grpc", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, errPart: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{name: "http/protobuf", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf"}, on: true, shown: "http://c:4318"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := decideTracing(tc.flag, envLookupIn(tc.env))
			if tc.errPart != "" {
				var ue *usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.errPart) {
					t.Fatalf("decideTracing = %+v, %v; want a usage error naming %q", got, err, tc.errPart)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error quotes the URL's password: %v", err)
				}
				return
			}
			if err != nil || got.on != tc.on || got.endpoint != tc.endpoint || got.shown != tc.shown {
				t.Fatalf("decideTracing = %+v, %v; want on %v, endpoint %q, shown %q", got, err, tc.on, tc.endpoint, tc.shown)
			}
		})
	}
}

// otlpCollector is a fake OpenTelemetry collector on loopback: it decodes
// every OTLP/HTTP protobuf export it receives.
type otlpCollector struct {
	srv *httptest.Server
	mu  sync.Mutex
	raw []string // every request body, for the secret check
	got []*collectortrace.ExportTraceServiceRequest
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	t.Helper()
	c := &otlpCollector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("export to %s as %q; want /v1/traces as application/x-protobuf", r.URL.Path, r.Header.Get("Content-Type"))
			w.WriteHeader(http.StatusNotFound)
			return
		}
		req := &collectortrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			t.Errorf("export body: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.raw = append(c.raw, string(body))
		c.got = append(c.got, req)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// exportedSpan is one span as the collector got it.
type exportedSpan struct {
	service, name string
	traceID       string
	updateID      int64
}

func (c *otlpCollector) spans() []exportedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []exportedSpan
	for _, req := range c.got {
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					e := exportedSpan{service: service, name: s.Name, traceID: string(s.TraceId), updateID: -1}
					for _, kv := range s.Attributes {
						if kv.Key == "tgrelay.update_id" {
							e.updateID = kv.GetValue().GetIntValue()
						}
					}
					out = append(out, e)
				}
			}
		}
	}
	return out
}

func (c *otlpCollector) bodies() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.raw, "\n")
}

// TestTracerProviderExportsByOTLP: the provider serve builds for
// --otlp-endpoint sends its spans to the collector's /v1/traces as
// protobuf, as service "tgrelay", and its last batch on shutdown.
func TestTracerProviderExportsByOTLP(t *testing.T) {
	t.Parallel()
	col := newOTLPCollector(t)
	ts, err := decideTracing(col.srv.URL, envLookupIn(nil))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	tp, err := newTracerProvider(t.Context(), ts, log)
	if err != nil || tp == nil {
		t.Fatalf("newTracerProvider = %v, %v", tp, err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "one span")
	span.End()
	shutdownTracing(tp, log)
	got := col.spans()
	if len(got) != 1 || got[0].name != "one span" || got[0].service != "tgrelay" {
		t.Fatalf("the collector got %+v; want the one span, of service tgrelay", got)
	}
}

// TestServeTracesAnUpdate: serve, turned on by the standard
// OTEL_EXPORTER_OTLP_ENDPOINT, sends the update's receive, store and
// forward spans to the collector in one trace, flushed when it stops,
// with no secret in any export.
func TestServeTracesAnUpdate(t *testing.T) {
	t.Parallel()
	srv := serveFakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	col := newOTLPCollector(t)
	db := filepath.Join(t.TempDir(), "relay.db")
	r := startServeProc(t, []string{"TGRELAY_TOKEN=" + srv.Token, "OTEL_EXPORTER_OTLP_ENDPOINT=" + col.srv.URL, "OTEL_SERVICE_NAME=echo-relay"},
		"--api-root", srv.URL, "--db", db, "--poll", "--forward", ep.url())
	ups := sendChatter(t, srv, 1, 1)
	serveWaitFor(t, "the update forwarded", func() bool { return ep.distinct() == 1 })
	if err := r.stop(t); err != nil {
		t.Fatalf("serve exited with %v; stderr:\n%s", err, r.stderr)
	}
	byName := map[string]exportedSpan{}
	for _, s := range col.spans() {
		if s.updateID == ups[0].ID || s.name == "tgrelay store" {
			byName[s.name] = s
		}
	}
	recv, fwd, store := byName["tgrelay receive"], byName["tgrelay forward"], byName["tgrelay store"]
	if recv.name == "" || fwd.name == "" || store.name == "" {
		t.Fatalf("the collector got %+v; want the update's receive, store and forward", col.spans())
	}
	if recv.traceID != fwd.traceID || recv.traceID != store.traceID || recv.service != "echo-relay" {
		t.Errorf("receive %+v, store %+v, forward %+v; want one trace, of service echo-relay (OTEL_SERVICE_NAME)", recv, store, fwd)
	}
	assertServeNoSecrets(t, r, srv.Token)
	if _, half, _ := strings.Cut(srv.Token, ":"); strings.Contains(col.bodies(), half) {
		t.Error("an export holds the token")
	}
}
