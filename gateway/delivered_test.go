package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestAnswerReadThenClosedIsDelivered: an app that reads its whole answer
// and then closes its connection at once (as an HTTP client does with a
// connection it will not keep) got the answer; the gateway must not report
// it undelivered, which tells the operator the app gave up.
func TestAnswerReadThenClosedIsDelivered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	const calls = 200
	for range calls {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodGet, f.srv.URL+"/bot"+f.tg.Token+"/getMe", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		conn.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("getMe = %d, %v", resp.StatusCode, err)
		}
	}
	undelivered := 0
	for range calls {
		if e := <-f.events; e.Undelivered {
			undelivered++
		}
	}
	if undelivered > 0 {
		t.Errorf("%d of %d answers read in full were reported undelivered", undelivered, calls)
	}
}
