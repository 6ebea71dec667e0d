package relay_test

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
)

// The relay's webhook listener, attacked on the wire: many connections
// that send half a request or nothing hold nothing up, requests a client
// library would never write are answered and not recorded, and the secret
// never reaches a log line.
func TestRelayWebhookUnderAttack(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	hook := listen(t)
	cfg.Poll, cfg.PollTimeout = false, 0
	cfg.Listener, cfg.Secret = hook, testSecret
	start(t, cfg)
	addr := hook.Addr().String()
	post := func(header, body string) string {
		return "POST " + relay.DefaultPath + " HTTP/1.1\r\nHost: tgrelay\r\n" + header + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	secret := intake.SecretHeader + ": " + testSecret + "\r\n"
	up := func(id int) string {
		return fmt.Sprintf(`{"update_id":%d,"message":{"chat":{"id":%d},"text":"x"}}`, id, id)
	}

	// Connections that never finish a request: some silent, some with
	// half a request line, some with the secret and half the headers,
	// some with the headers and half the body.
	for i := range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		switch i % 4 {
		case 1:
			io.WriteString(c, "POST "+relay.DefaultPath)
		case 2:
			io.WriteString(c, "POST "+relay.DefaultPath+" HTTP/1.1\r\nHost: tgrelay\r\n"+secret)
		case 3:
			io.WriteString(c, post(secret, up(1000+i))[:150])
		}
	}
	for _, tc := range []struct {
		name string
		raw  string
		want []int
	}{
		{"an update among the stalled", post(secret, up(1)), []int{200}},
		{"its duplicate", post(secret, up(1)), []int{200}},
		{"no secret", post("", up(2)), []int{403}},
		{"two secrets", post(secret+secret, up(3)), []int{403}},
		{"a secret's prefix", post(intake.SecretHeader+": "+testSecret[:10]+"\r\n", up(4)), []int{403}},
		{"another path", strings.Replace(post(secret, up(5)), relay.DefaultPath, relay.DefaultPath+"x", 1), []int{404}},
		{"a string update_id", post(secret, `{"update_id":"6"}`), []int{400}},
		{"a float update_id", post(secret, `{"update_id":1e3}`), []int{400}},
		{"an update_id beyond int64", post(secret, `{"update_id":9223372036854775808}`), []int{400}},
		{"a NUL chat id", post(secret, `{"update_id":7,"message":{"chat":{"id":"\u0000"}}}`), []int{200}},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", []int{400}},
		{"pipelined", post(secret, up(8)) + post(secret, up(9)), []int{200, 200}},
		{"headers over the bound", post(secret+"X-Big: "+strings.Repeat("b", 70<<10)+"\r\n", up(10)), []int{431}},
		{"a length over the bound", "POST " + relay.DefaultPath + " HTTP/1.1\r\nHost: tgrelay\r\n" + secret +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", intake.DefaultMaxBodyBytes+1) + up(11), []int{413}},
		{"a chunked body over the bound", "POST " + relay.DefaultPath + " HTTP/1.1\r\nHost: tgrelay\r\n" + secret + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n", intake.DefaultMaxBodyBytes+1) + strings.Repeat("x", intake.DefaultMaxBodyBytes+1) + "\r\n0\r\n\r\n", []int{413}},
	} {
		if got := testkit.RawExchange(t, addr, tc.raw); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: answered %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, id := range []int64{1, 7, 8, 9} {
		testkit.WaitFor(t, fmt.Sprintf("update %d forwarded", id), func() bool { return len(ep.hitsOf(id)) > 0 })
	}
	if n := len(ep.hitsOf(1)); n != 1 {
		t.Errorf("update 1 forwarded %d times, want once", n)
	}
	for _, id := range []int64{2, 3, 4, 5, 10, 11} {
		if n := len(ep.hitsOf(id)); n != 0 {
			t.Errorf("update %d of a refused request forwarded %d times", id, n)
		}
	}
	assertNoSecrets(t, "the relay's logs", logs.String(), srv.Token)
}
