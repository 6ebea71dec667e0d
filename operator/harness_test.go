package operator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/operator"
)

// testToken has a real token's shape.
const testToken = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"

// sent is one sendMessage request the fake Bot API received.
type sent struct {
	ChatID   int64  `json:"chat_id"`
	ThreadID int64  `json:"message_thread_id"`
	Text     string `json:"text"`
	Parse    string `json:"parse_mode"`
	Preview  struct {
		Disabled bool `json:"is_disabled"`
	} `json:"link_preview_options"`
	Path string `json:"-"`
}

// answer is what the fake Bot API replies to one call.
type answer struct {
	status int
	body   string
	hold   chan struct{} // when not nil, the reply waits until it is closed
}

func ok() answer { return answer{status: 200, body: `{"ok":true,"result":{"message_id":1}}`} }

func refusal(code int, description string, params string) answer {
	if params == "" {
		params = "{}"
	}
	return answer{status: code, body: fmt.Sprintf(`{"ok":false,"error_code":%d,"description":%q,"parameters":%s}`, code, description, params)}
}

// botServer is a real HTTP server speaking the Bot API envelope for
// sendMessage, answering from a script (then ok), recording every request.
type botServer struct {
	*httptest.Server

	mu      sync.Mutex
	calls   []sent
	script  []answer
	arrived chan int // receives the index of each call as it arrives
}

// newBotServer starts the server; it must be called outside a synctest
// bubble, since its goroutines and channels belong to the test.
func newBotServer(t *testing.T, script ...answer) *botServer {
	t.Helper()
	s := &botServer{script: script, arrived: make(chan int, 1000)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *botServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m sent
	_ = json.Unmarshal(body, &m)
	m.Path = r.URL.Path
	s.mu.Lock()
	i := len(s.calls)
	s.calls = append(s.calls, m)
	a := ok()
	if i < len(s.script) {
		a = s.script[i]
	}
	s.mu.Unlock()
	s.arrived <- i
	if a.hold != nil {
		select {
		case <-a.hold:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

// Calls returns a snapshot of the requests received.
func (s *botServer) Calls() []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sent(nil), s.calls...)
}

// Texts returns the texts received, in order.
func (s *botServer) Texts() []string {
	var out []string
	for _, c := range s.Calls() {
		out = append(out, c.Text)
	}
	return out
}

// awaitCall waits, bounded, for call number i to arrive.
func (s *botServer) awaitCall(t *testing.T, i int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-s.arrived:
			if got >= i {
				return
			}
		case <-deadline:
			t.Fatalf("call %d did not arrive", i)
		}
	}
}

// clock records the (bubble) time of every request passing through it.
type clock struct {
	base  http.RoundTripper
	mu    sync.Mutex
	times []time.Time
}

func (c *clock) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.times = append(c.times, time.Now())
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

// gaps returns the intervals between recorded requests.
func (c *clock) gaps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(c.times); i++ {
		out = append(out, c.times[i].Sub(c.times[i-1]))
	}
	return out
}

// newClient returns a botapi client for srv whose connections are not kept
// alive (so no connection goroutine outlives a synctest bubble) and whose
// requests are timed by the returned clock.
func newClient(t *testing.T, srv *botServer) (*botapi.Client, *clock) {
	t.Helper()
	clk := &clock{base: newClientHTTP().Transport}
	c, err := botapi.New(testToken, botapi.Config{APIRoot: srv.URL, HTTPClient: &http.Client{Transport: clk}})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

// drops collects OnDrop reports.
type drops struct {
	mu   sync.Mutex
	list []operator.Drop
}

func (d *drops) add(x operator.Drop) {
	d.mu.Lock()
	d.list = append(d.list, x)
	d.mu.Unlock()
}

// Summary returns "text:reason" for each drop.
func (d *drops) Summary() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, x := range d.list {
		out = append(out, x.Text+":"+string(x.Reason))
	}
	return out
}

func (d *drops) All() []operator.Drop {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]operator.Drop(nil), d.list...)
}

// newChannel builds a channel over client with cfg, reporting into drops.
func newChannel(t *testing.T, client *botapi.Client, cfg operator.Config) (*operator.Channel, *drops) {
	t.Helper()
	d := &drops{}
	cfg.ChatID = cmpOr(cfg.ChatID, -100500)
	if cfg.SendFunc == nil {
		cfg.Client = client
	}
	cfg.OnDrop = d.add
	ch, err := operator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	return ch, d
}

func cmpOr(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

// drain waits for the channel to empty, failing loudly if it does not.
func drain(t *testing.T, ch *operator.Channel) {
	t.Helper()
	ctx, cancel := contextWithTimeout(t, time.Hour)
	defer cancel()
	if err := ch.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
}

// newClientHTTP returns an HTTP client that keeps no connection alive.
func newClientHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}
