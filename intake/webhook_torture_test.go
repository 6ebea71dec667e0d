package intake_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// rawWebhook serves a webhook over memstore on a loopback http.Server,
// for requests written by hand: what a client library would refuse to
// send, or would send more politely.
type rawWebhook struct {
	store *memstore.Store
	srv   *httptest.Server
}

func setupRawWebhook(t *testing.T, wrap func(http.Handler) http.Handler) *rawWebhook {
	t.Helper()
	b := &rawWebhook{store: memstore.New()}
	r := newRunner(t, intake.Config{Store: b.store, Handler: nop})
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = wh
	if wrap != nil {
		h = wrap(wh)
	}
	b.srv = httptest.NewServer(h)
	t.Cleanup(b.srv.Close)
	return b
}

// dial opens a connection to the webhook, closed when the test ends.
func (b *rawWebhook) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", b.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange writes raw on a new connection and returns the status of every
// final response (see testkit.RawExchange).
func (b *rawWebhook) exchange(t *testing.T, raw string) []int {
	t.Helper()
	return testkit.RawExchange(t, b.srv.Listener.Addr().String(), raw)
}

// post is a hand-written POST of body with the given header lines.
func post(header, body string) string {
	return "POST /telegram HTTP/1.1\r\nHost: tgrelay\r\n" + header + "\r\n" + body
}

func secretLine(s string) string { return intake.SecretHeader + ": " + s + "\r\n" }

func lengthLine(body string) string { return fmt.Sprintf("Content-Length: %d\r\n", len(body)) }

// Requests that HTTP/1.1 framing and the secret check must get right, on
// the wire.
func TestWebhookRawRequests(t *testing.T) {
	t.Parallel()
	b := setupRawWebhook(t, nil)
	up := func(id int) string { return fmt.Sprintf(`{"update_id":%d}`, id) }
	for _, tc := range []struct {
		name string
		raw  string
		want []int
		id   int // recorded when not 0
	}{
		{"plain", post(secretLine(testSecret)+lengthLine(up(1)), up(1)), []int{200}, 1},
		{"secret name in lower case", post(strings.ToLower(secretLine(""))[:len(intake.SecretHeader)+2]+testSecret+"\r\n"+lengthLine(up(2)), up(2)), []int{200}, 2},
		{"secret with surrounding blanks", post(intake.SecretHeader+": \t"+testSecret+" \t\r\n"+lengthLine(up(3)), up(3)), []int{200}, 3},
		{"secret missing", post(lengthLine(up(4)), up(4)), []int{403}, 0},
		{"secret empty", post(intake.SecretHeader+":\r\n"+lengthLine(up(5)), up(5)), []int{403}, 0},
		{"secret twice", post(secretLine(testSecret)+secretLine(testSecret)+lengthLine(up(6)), up(6)), []int{403}, 0},
		{"secret prefix", post(secretLine(testSecret[:len(testSecret)-1])+lengthLine(up(7)), up(7)), []int{403}, 0},
		{"secret extended", post(secretLine(testSecret+"x")+lengthLine(up(8)), up(8)), []int{403}, 0},
		{"secret of 257 characters", post(secretLine(strings.Repeat("a", 257))+lengthLine(up(9)), up(9)), []int{403}, 0},
		{"secret name with underscores", post(strings.ReplaceAll(intake.SecretHeader, "-", "_")+": "+testSecret+"\r\n"+lengthLine(up(10)), up(10)), []int{403}, 0},
		{"body shorter than its length", post(secretLine(testSecret)+"Content-Length: 40\r\n", up(11)), []int{400}, 0},
		{"body longer than its length", post(secretLine(testSecret)+"Content-Length: 5\r\n", up(12)), []int{400, 400}, 0}, // the rest is a second, bad request
		{"chunked", post(secretLine(testSecret)+"Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(up(13)), up(13))), []int{200}, 13},
		{"chunk size overflowing", post(secretLine(testSecret)+"Transfer-Encoding: chunked\r\n", "fffffffffffffffffffff\r\n"+up(14)+"\r\n0\r\n\r\n"), []int{400}, 0},
		{"chunk size garbage", post(secretLine(testSecret)+"Transfer-Encoding: chunked\r\n", "zz\r\n"+up(15)+"\r\n0\r\n\r\n"), []int{400}, 0},
		{"chunk extension", post(secretLine(testSecret)+"Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x;a=b\r\n%s\r\n0\r\n\r\n", len(up(16)), up(16))), []int{200}, 16},
		{"length and chunked", post(secretLine(testSecret)+"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(up(17)), up(17))), []int{200}, 17},
		{"two lengths", post(secretLine(testSecret)+lengthLine(up(18))+"Content-Length: 3\r\n", up(18)), []int{400}, 0},
		{"negative length", post(secretLine(testSecret)+"Content-Length: -1\r\n", up(19)), []int{400}, 0},
		{"length over the limit", post(secretLine(testSecret)+fmt.Sprintf("Content-Length: %d\r\n", intake.DefaultMaxBodyBytes+1), up(20)), []int{413}, 0},
		{"gzip content encoding", post(secretLine(testSecret)+"Content-Encoding: gzip\r\n"+lengthLine("\x1f\x8b\x08\x00"), "\x1f\x8b\x08\x00"), []int{400}, 0},
		{"expect 100-continue", post(secretLine(testSecret)+"Expect: 100-continue\r\n"+lengthLine(up(21)), up(21)), []int{200}, 21},
		{"expect 100-continue without the secret", post("Expect: 100-continue\r\n"+lengthLine(up(22)), ""), []int{403}, 0},
		{"pipelined", post(secretLine(testSecret)+lengthLine(up(23)), up(23)) + post(secretLine(testSecret)+lengthLine(up(24)), up(24)), []int{200, 200}, 24},
		{"h2c upgrade", post(secretLine(testSecret)+"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n"+lengthLine(up(25)), up(25)), []int{200}, 25},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", []int{405}, 0}, // a PRI request, to the webhook
		{"GET", "GET /telegram HTTP/1.1\r\nHost: tgrelay\r\n" + secretLine(testSecret) + "\r\n", []int{405}, 0},
		{"thousands of headers", post(secretLine(testSecret)+strings.Repeat("X-A: b\r\n", 3000)+lengthLine(up(26)), up(26)), []int{200}, 26},
		{"a header over the server's limit", post(secretLine(testSecret)+"X-Big: "+strings.Repeat("b", http.DefaultMaxHeaderBytes+8192)+"\r\n"+lengthLine(up(27)), up(27)), []int{431}, 0},
	} {
		if got := b.exchange(t, tc.raw); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: answered %v, want %v", tc.name, got, tc.want)
		}
		if tc.id != 0 {
			if _, ok, err := b.store.Get(t.Context(), int64(tc.id)); err != nil || !ok {
				t.Errorf("%s: update %d not recorded (%v)", tc.name, tc.id, err)
			}
		}
	}
	for _, id := range []int64{4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 18, 19, 20, 22, 27} {
		if _, ok, _ := b.store.Get(t.Context(), id); ok {
			t.Errorf("update %d recorded from a refused request", id)
		}
	}
}

// firstRead reports, once per request, that the webhook began reading its
// body.
type firstRead struct {
	io.ReadCloser
	began chan<- struct{}
	told  bool
}

func (f *firstRead) Read(p []byte) (int, error) {
	if !f.told {
		f.told = true
		f.began <- struct{}{}
	}
	return f.ReadCloser.Read(p)
}

// A request that declares a body as large as the limit and sends none of
// it must not make the webhook hold that much memory while it waits: each
// of many such connections (a few hundred bytes of headers apiece) pinned
// a whole limit's buffer for as long as the server's read timeout allowed.
//
// Not parallel: it measures the heap, which other tests would move.
func TestWebhookDeclaredLengthBuysNoMemory(t *testing.T) {
	const conns = 32
	began := make(chan struct{}, conns)
	b := setupRawWebhook(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			req.Body = &firstRead{ReadCloser: req.Body, began: began}
			h.ServeHTTP(w, req)
		})
	})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	for range conns {
		c := b.dial(t)
		if _, err := io.WriteString(c, post(secretLine(testSecret)+fmt.Sprintf("Content-Length: %d\r\n", intake.DefaultMaxBodyBytes), `{"upd`)); err != nil {
			t.Fatal(err)
		}
	}
	for range conns {
		select {
		case <-began:
		case <-time.After(10 * time.Second):
			t.Fatal("the webhook did not begin reading every stalled body")
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grew, limit := int64(ms.HeapAlloc)-int64(before), int64(conns*intake.DefaultMaxBodyBytes/4); grew > limit {
		t.Errorf("%d connections that declared %d-byte bodies and sent 5 bytes grew the heap by %d KiB; want under %d KiB",
			conns, intake.DefaultMaxBodyBytes, grew>>10, limit>>10)
	}
}

// A body of declared length that arrives a few bytes at a time is read
// whole, however it is split.
func TestWebhookTricklingBody(t *testing.T) {
	t.Parallel()
	b := setupRawWebhook(t, nil)
	body := `{"update_id":31,"message":{"chat":{"id":1},"text":"` + strings.Repeat("x", 10000) + `"}}`
	c := b.dial(t)
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	raw := post(secretLine(testSecret)+lengthLine(body), body)
	for i := 0; i < len(raw); i += 997 {
		if _, err := io.WriteString(c, raw[i:min(i+997, len(raw))]); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if row, ok, err := b.store.Get(t.Context(), 31); err != nil || !ok || string(row.Body) != body {
		t.Fatalf("update 31 = %v, %v: want the body as sent", ok, err)
	}
}

// TestWebhookTooLargeEndsTheConnection: a chunked body over the limit is
// answered 413 with Connection: close, even behind a handler that wraps
// the ResponseWriter (as the relay's does, hiding net/http's own signal
// to close). Without it the server read on, draining up to 256 KiB more of
// the refused body to keep the connection, and served what followed.
func TestWebhookTooLargeEndsTheConnection(t *testing.T) {
	t.Parallel()
	b := setupRawWebhook(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(struct{ http.ResponseWriter }{w}, r)
		})
	})
	var chunks strings.Builder
	chunk := strings.Repeat("x", 64<<10)
	for range (intake.DefaultMaxBodyBytes >> 16) + 2 {
		fmt.Fprintf(&chunks, "%x\r\n%s\r\n", len(chunk), chunk)
	}
	chunks.WriteString("0\r\n\r\n")
	good := `{"update_id":7}`
	raw := post(secretLine(testSecret)+"Transfer-Encoding: chunked\r\n", chunks.String()) +
		post(secretLine(testSecret)+lengthLine(good), good)
	if got := b.exchange(t, raw); len(got) != 1 || got[0] != http.StatusRequestEntityTooLarge {
		t.Fatalf("statuses %v; want one 413 and the connection closed", got)
	}
}
