package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/throttle"
)

// TestCallTimeoutHeaderRoundsUp: Tgrelay-Call-Timeout states Bounds.Answer
// in whole seconds rounded up, so an app whose HTTP timeout exceeds it
// never gives up on a call still within the bound; rounded down, it would
// promise an answer half a second sooner than the gateway keeps.
func TestCallTimeoutHeaderRoundsUp(t *testing.T) {
	lim := mustLimiter(t, throttle.Config{MaxWait: 1500 * time.Millisecond})
	g, err := gateway.New(gateway.Config{Token: "1:x", Transport: throttle.NewTransport(lim, nil), ResponseTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if a := g.Bounds().Answer; a != 1500*time.Millisecond+2*time.Second+gateway.OutcomeTimeout {
		t.Fatalf("Bounds().Answer = %v", a)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/nothing", nil))
	if got := w.Header().Get(gateway.HeaderCallTimeout); got != "14" {
		t.Errorf("%s = %q for an Answer of 13.5s; want \"14\"", gateway.HeaderCallTimeout, got)
	}
}
