package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// serve on PostgreSQL, posted bodies Telegram would never send but a
// webhook must still answer rightly, by hand on a raw connection: each is
// recorded and forwarded (200), or refused (400, 403) and never
// forwarded. None is answered 503: Telegram would deliver a 503'd body
// again and again, and a chat id holding \u0000 was one, since
// PostgreSQL's text cannot hold a NUL. The secret appears in no output.
func TestServeWebhookOddBodiesOnPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	srv := serveFakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	addr := testkit.FreeAddr(t)
	r := startServeProc(t, []string{"TGRELAY_WEBHOOK_SECRET=" + testSecret},
		"--token", srv.Token, "--api-root", srv.URL, "--db", db, "--listen", addr, "--forward", ep.url(),
		"--webhook-check-interval", "0")
	exchange := func(secret, body string) int {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /telegram HTTP/1.1\r\nHost: tgrelay\r\n%s: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			intake.SecretHeader, secret, len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to %.60q: %v", body, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		body string
		id   int64 // forwarded when not 0
		want int
	}{
		{`{"update_id":1,"message":{"chat":{"id":"\u0000","type":"private"},"text":"x"}}`, 1, 200},
		{`{"update_id":2,"message":{"chat":{"id":2},"from":{"id":"a\u0000"},"text":"\u0000"}}`, 2, 200},
		{"{\"update_id\":3,\"message\":{\"chat\":{\"id\":\"\xff\"},\"text\":\"\xc3\x28\"}}", 3, 200},
		{`{"update_id":4,"update_id":5,"message":{"chat":{"id":4}}}`, 0, 400},
		{`{"update_id":0,"message":{"chat":{"id":1e400}}}`, 0, 200},
		{`{"update_id":"6"}`, 0, 400},
		{`{"update_id":7}` + "\x00", 0, 400},
		{strings.Repeat("[", 20000), 0, 400},
	} {
		for try := range 2 {
			if got := exchange(testSecret, tc.body); got != tc.want {
				t.Errorf("%.60q (#%d): answered %d, want %d", tc.body, try+1, got, tc.want)
			}
		}
	}
	if got := exchange(testSecret[:len(testSecret)-1], `{"update_id":8}`); got != http.StatusForbidden {
		t.Errorf("a secret's prefix answered %d, want 403", got)
	}
	serveWaitFor(t, "the recorded updates forwarded", func() bool {
		return len(ep.hitsOf(0)) > 0 && len(ep.hitsOf(1)) > 0 && len(ep.hitsOf(2)) > 0 && len(ep.hitsOf(3)) > 0
	}, r)
	for _, id := range []int64{4, 5, 6, 7, 8} {
		if n := len(ep.hitsOf(id)); n != 0 {
			t.Errorf("update %d forwarded %d times, want never", id, n)
		}
	}
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit after SIGTERM: %v\n%s", err, r.stderr)
	}
	assertServeNoSecrets(t, r, srv.Token)
}
