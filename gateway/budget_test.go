package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// TestBufferedBodiesShareOneBound holds the whole of MaxBufferedTotal with
// one call whose body is still arriving: another call then waits for its
// share until its time bound ends, and is answered not dispatched, sent to
// no one. Once the first call ends, its share is free again.
func TestBufferedBodiesShareOneBound(t *testing.T) {
	t.Parallel()
	const limit = 1000
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
		c.MaxBufferedBody, c.MaxBufferedTotal = limit, limit
		// No limiter (MaxWait zero): a call's time bound is its
		// ResponseTimeout, which the second call spends waiting.
		base, err := transport.New(transport.Config{})
		if err != nil {
			t.Fatal(err)
		}
		c.Transport, c.StreamTransport, c.ResponseTimeout = base, nil, 2*time.Second
	}})
	id := f.claim(t, 1)
	rt := f.gw.RoundTripper()
	url := f.tg.URL + "/bot" + f.tg.Token + "/sendMessage"
	call := func(ctx context.Context, body io.Reader) (*http.Response, error) {
		req, err := http.NewRequestWithContext(gateway.WithIdentity(ctx, id), http.MethodPost, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return rt.RoundTrip(req)
	}

	// The first call's app has sent limit bytes of its body: the pipe's
	// Write returns once the gateway read them.
	pr, pw := io.Pipe()
	firstDone := make(chan int, 1)
	go func() {
		resp, err := call(t.Context(), pr)
		if err != nil {
			firstDone <- 0
			return
		}
		resp.Body.Close()
		firstDone <- resp.StatusCode
	}()
	if _, err := pw.Write(bytes.Repeat([]byte(" "), limit)); err != nil {
		t.Fatal(err)
	}

	resp, err := call(t.Context(), bytes.NewReader([]byte(`{"chat_id":`+itoa(f.chat.ID)+`,"text":"second"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != gateway.StatusNotDispatched || wire.OutcomeOf(resp.Header) != wire.OutcomeNotDispatched {
		t.Errorf("a call with no room for its body = %d (outcome %q); want %d not dispatched", resp.StatusCode, resp.Header.Get(wire.HeaderOutcome), gateway.StatusNotDispatched)
	}
	if n := f.ledger("second"); n != 0 {
		t.Errorf("the call with no room for its body was sent %d times", n)
	}

	pw.CloseWithError(errors.New("the app stopped"))
	if status := <-firstDone; status != http.StatusBadRequest {
		t.Errorf("the first call, its body broken off = %d; want 400", status)
	}
	if r := f.send(t, &id, "third"); r.status != http.StatusOK || f.ledger("third") != 1 {
		t.Errorf("a call after the first ended = %d %s; want Telegram's 200, sent once", r.status, r.body)
	}
}
