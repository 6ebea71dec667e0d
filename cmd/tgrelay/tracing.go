package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/relay"
)

// traceShutdownTimeout bounds sending the last traces when serve stops.
const traceShutdownTimeout = 5 * time.Second

// defaultOTLPEndpoint is where OTLP/HTTP sends without an endpoint, as the
// OpenTelemetry specification says.
const defaultOTLPEndpoint = "http://localhost:4318"

// traceSetup is what --otlp-endpoint and the standard OTEL_* variables ask
// of serve's tracing.
type traceSetup struct {
	on bool
	// endpoint is --otlp-endpoint's traces URL (base + /v1/traces), ""
	// when the exporter reads its endpoint from the environment.
	endpoint string
	// shown is the endpoint's scheme and host, for the log line.
	shown string
}

// decideTracing reads flagEndpoint (--otlp-endpoint, a base URL) and the
// OpenTelemetry variables through lookup. Tracing is off unless the flag,
// an OTLP endpoint variable or OTEL_TRACES_EXPORTER=otlp asks for it;
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off (the
// flag wins over them, as a flag wins over the environment). Only the
// otlp exporter over http/protobuf is built in: anything else is an error
// naming the variable, not a silent fallback.
func decideTracing(flagEndpoint string, lookup func(string) (string, bool)) (traceSetup, error) {
	env := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	if flagEndpoint != "" {
		u, err := url.Parse(flagEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return traceSetup{}, &usageError{msg: "--otlp-endpoint must be an http or https base URL",
				hint: "Give the collector's OTLP/HTTP address, such as http://localhost:4318; traces go to its /v1/traces."}
		}
		if err := configerr.URLCredential(u, otlpCredentialHint); err != nil {
			return traceSetup{}, &usageError{msg: "--otlp-endpoint " + err.Error()}
		}
		u.Path = strings.TrimRight(u.Path, "/") + "/v1/traces"
		if err := otlpProtocol(env); err != nil {
			return traceSetup{}, err
		}
		return traceSetup{on: true, endpoint: u.String(), shown: u.Scheme + "://" + u.Host}, nil
	}
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return traceSetup{}, nil
	}
	endpoint := cmp.Or(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), env("OTEL_EXPORTER_OTLP_ENDPOINT"))
	switch exp := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return traceSetup{}, nil
	case "":
		if endpoint == "" {
			return traceSetup{}, nil // off by default
		}
	case "otlp":
	default:
		return traceSetup{}, &usageError{msg: fmt.Sprintf("OTEL_TRACES_EXPORTER=%s is not supported", exp),
			hint: "serve exports traces by OTLP only: set OTEL_TRACES_EXPORTER to otlp or none."}
	}
	if err := otlpProtocol(env); err != nil {
		return traceSetup{}, err
	}
	shown := defaultOTLPEndpoint
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return traceSetup{}, &usageError{msg: "OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is not a URL",
				hint: "Give the collector's OTLP/HTTP address, such as http://localhost:4318."}
		}
		if err := configerr.URLCredential(u, otlpCredentialHint); err != nil {
			return traceSetup{}, &usageError{msg: "OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) " + err.Error()}
		}
		shown = u.Scheme + "://" + u.Host
	}
	return traceSetup{on: true, shown: shown}, nil
}

// otlpCredentialHint says where a collector's credential goes instead of
// its URL, which the OTLP exporter would use without its user and
// password.
const otlpCredentialHint = "the exporter would drop it; give the collector's credential in OTEL_EXPORTER_OTLP_HEADERS instead"

// otlpProtocol refuses an OTLP protocol other than http/protobuf.
func otlpProtocol(env func(string) string) error {
	p := cmp.Or(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), env("OTEL_EXPORTER_OTLP_PROTOCOL"))
	if p == "" || p == "http/protobuf" {
		return nil
	}
	return &usageError{msg: fmt.Sprintf("OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported", p),
		hint: "serve sends OTLP over HTTP with protobuf: set it to http/protobuf (a collector's port 4318)."}
}

// newTracerProvider builds the provider of s: a batching OTLP/HTTP exporter
// (endpoint, headers, timeout, TLS and compression from the standard
// variables unless --otlp-endpoint names the endpoint), the sampler of
// OTEL_TRACES_SAMPLER, the resource of OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (service.name "tgrelay" by default), and the
// relay's ids, so that an update's receive roots its trace. Export errors
// are logged to log, which redacts. Nil when s is off.
func newTracerProvider(ctx context.Context, s traceSetup, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	if !s.on {
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if s.endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(s.endpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("traces: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "tgrelay")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	switch {
	case errors.Is(err, resource.ErrPartialResource):
		log.Warn("serve: tracing: part of OTEL_RESOURCE_ATTRIBUTES was not understood; the rest applies", "err", err)
	case err != nil:
		return nil, fmt.Errorf("traces: resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("serve: sending traces failed", "err", err)
	}))
	log.Info("serve: tracing: OpenTelemetry traces by OTLP/HTTP", "endpoint", s.shown)
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(relay.TraceIDGenerator{}),
	), nil
}

// shutdownTracing sends the traces still batched, within
// traceShutdownTimeout.
func shutdownTracing(tp *sdktrace.TracerProvider, log *slog.Logger) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), traceShutdownTimeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("serve: the last traces were not sent", "err", err)
	}
}
