package relay_test

import (
	"context"
	"fmt"
	"log"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/relay"
)

// A relay traces each update as one OpenTelemetry trace when its Config
// has a TracerProvider. The SDK, and whichever exporter (OTLP, say), are
// the program's; relay.TraceIDGenerator makes the receive of each update
// the root of its trace. Here the spans go to memory.
func ExampleTraceIDGenerator() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithIDGenerator(relay.TraceIDGenerator{}))
	defer tp.Shutdown(context.Background()) // sends the last batch

	_, err := relay.New(relay.Config{
		Token:          "123456:the-token-BotFather-gave-you-xxxxxxxx",
		Store:          memstore.New(),
		Poll:           true,
		Forward:        forward.Config{URL: "http://127.0.0.1:3000/telegram-update"},
		TracerProvider: tp,
	})
	if err != nil {
		log.Fatal(err)
	}
	// Run it; the app reads the traceparent of each forward, and sends its
	// own with its calls to the gateway, to join the update's trace.
	fmt.Println("tracing each update")

	// Output: tracing each update
}
