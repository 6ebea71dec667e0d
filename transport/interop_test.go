package transport_test

import (
	"bufio"
	"net"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/transport"
)

// TestBotAPIClassifiesTransportErrors checks the contract with botapi: a
// not-dispatched error is recognised through its NotDispatched method even
// inside http.Client's *url.Error, and a sent request stays unknown.
func TestBotAPIClassifiesTransportErrors(t *testing.T) {
	t.Parallel()
	client, err := transport.NewClient(transport.Config{Proxy: noProxy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseIdleConnections)
	post := func(base string) error {
		resp, err := client.Post(base+secretPath, "application/json", strings.NewReader(payload))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	refused := "http://" + closedport.Addr(t)
	if f := botapi.Classify(post(refused)); f.Reason != botapi.ReasonNotDispatched || !f.Retryable {
		t.Errorf("refused connection classified %+v, want not-dispatched and retryable", f)
	}

	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err == nil {
			c.(*net.TCPConn).SetLinger(0)
		}
	})
	if f := botapi.Classify(post(srv.url())); f.Reason != botapi.ReasonUnknown || f.Retryable {
		t.Errorf("reset after the request classified %+v, want unknown and not retryable", f)
	}
}
