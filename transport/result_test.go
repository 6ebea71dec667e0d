package transport_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/transport"
)

// The unknown-outcome mark survives the wrapping of net/http's Client (a
// *url.Error) and of a library's fmt.Errorf("%w").
func TestOutcomeUnknownMarkSurvivesWrapping(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		c.(*net.TCPConn).SetLinger(0) // close with RST after reading it all
	})
	client := &http.Client{Transport: newTransport(t, transport.Config{})}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url()+secretPath, strings.NewReader(payload))
	_, err := client.Do(req)
	err = fmt.Errorf("library: call sendMessage: %w", err)
	var unknown interface{ OutcomeUnknown() bool }
	if !errors.As(err, &unknown) || !unknown.OutcomeUnknown() {
		t.Fatalf("err = %v: the unknown-outcome mark was lost", err)
	}
}

// A result func sees every request's end: the answer (whose body the
// caller can still read), the gateway's unknown header, and errors; never
// the URL.
func TestResultFuncSeesEveryRequest(t *testing.T) {
	t.Parallel()
	var n int
	var mu sync.Mutex
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			mu.Lock()
			n++
			i := n
			mu.Unlock()
			switch i {
			case 1:
				body := `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}`
				fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			case 2:
				body := `{"ok":false,"error_code":502,"description":"Bad Gateway: outcome unknown"}`
				fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nTgrelay-Outcome: unknown\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			default:
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				return
			}
		}
	})
	tr := newTransport(t, transport.Config{})
	var got []transport.Result
	ctx := transport.WithResultFunc(t.Context(), func(r transport.Result) { got = append(got, r) })
	var outer int
	ctx = transport.WithResultFunc(ctx, func(transport.Result) {
		if len(got) != outer+1 {
			t.Errorf("the later func ran before the earlier one")
		}
		outer++
	})

	resp, err := send(ctx, tr, srv.url())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "retry_after") {
		t.Fatalf("caller read %q after the result func, want the whole body", body)
	}
	if _, err := send(ctx, tr, srv.url()); err != nil {
		t.Fatal(err)
	}
	_, err = send(ctx, tr, srv.url())
	assertUnknown(t, err)
	_, err = send(ctx, tr, "http://"+closedport.Addr(t))
	assertNotDispatched(t, err, transport.StageConnect)
	if transport.ResultFuncFrom(transport.WithResultFunc(ctx, nil)) != nil {
		t.Error("WithResultFunc(ctx, nil) left a func in the context")
	}
	if transport.ResultFuncFrom(ctx) == nil {
		t.Error("ResultFuncFrom found no func")
	}
	if len(got) != 4 || outer != 4 {
		t.Fatalf("inner func saw %d results, outer %d; want 4 each", len(got), outer)
	}
	if r := got[0]; r.Method != "sendMessage" || r.Status != 429 || r.Err != nil || r.Unknown() || !strings.Contains(string(r.Body), `"retry_after":3`) {
		t.Errorf("first result = %+v, want the 429 answer of sendMessage", r)
	}
	if r := got[1]; r.Status != 502 || !r.Unknown() {
		t.Errorf("second result = %+v, want the gateway's unknown answer", r)
	}
	if r := got[2]; r.Err == nil || !r.Unknown() || r.Status != 0 {
		t.Errorf("third result = %+v, want an unknown-outcome error", r)
	}
	if r := got[3]; r.Err == nil || r.Unknown() {
		t.Errorf("fourth result = %+v, want a not-dispatched error, not unknown", r)
	}
	for _, r := range got {
		if strings.Contains(r.Method, secret) {
			t.Errorf("result method %q holds the token", r.Method)
		}
	}
}
