package botapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/transport"
)

// TestCallOverTransport runs Call over tgrelay's transport: a refused
// connection is a *transport.NotDispatchedError reached through the
// *RequestError, classified not-dispatched, with no token in the message;
// an answered call works as usual.
func TestCallOverTransport(t *testing.T) {
	t.Parallel()
	hc, err := transport.NewClient(transport.Config{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)

	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	c, err := botapi.New(realToken, botapi.Config{APIRoot: closedURL, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(t.Context(), "sendMessage", map[string]any{"chat_id": 1, "text": "x"})
	var nd *transport.NotDispatchedError
	if !errors.As(err, &nd) || nd.Stage != transport.StageConnect {
		t.Fatalf("err = %T %v, want a not-dispatched error at stage connect", err, err)
	}
	var re *botapi.RequestError
	if !errors.As(err, &re) {
		t.Errorf("err = %T, want *RequestError", err)
	}
	if strings.Contains(err.Error(), secretOf(realToken)) {
		t.Errorf("error leaks the token: %v", err)
	}
	if f := botapi.Classify(err); f.Reason != botapi.ReasonNotDispatched || !f.Retryable || f.Evidence != botapi.EvidenceTransport {
		t.Errorf("Classify = %+v, want retryable not-dispatched from the transport", f)
	}

	_, srv := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"ok": true, "result": true})
	})
	c3, err := botapi.New(realToken, botapi.Config{APIRoot: srv.URL, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := c3.Call(t.Context(), "getMe", nil); err != nil || string(raw) != "true" {
		t.Errorf("Call over transport = %s, %v", raw, err)
	}
}

func TestZeroClient(t *testing.T) {
	t.Parallel()
	var c botapi.Client
	if _, err := c.Call(t.Context(), "getMe", nil); !errors.Is(err, botapi.ErrNotConfigured) {
		t.Errorf("zero Client Call = %v, want ErrNotConfigured", err)
	}
}
