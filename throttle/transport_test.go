package throttle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/wire"
)

// fakeTelegram is a telegramtest server whose limits run on the fake clock
// of the synctest bubble that calls it: the server runs outside the bubble
// (it uses the network), and every request from the bubble stamps the
// bubble's time first. Time in a bubble stands still while a request is on
// the wire, so the stamp is the server's "now" for that request.
type fakeTelegram struct {
	*telegramtest.Server
	now atomic.Int64 // UnixNano of the bubble's time at the last request
}

func newFakeTelegram(t *testing.T, limits telegramtest.Limits) *fakeTelegram {
	t.Helper()
	ft := &fakeTelegram{}
	ft.now.Store(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	srv := telegramtest.NewUnstartedServer(telegramtest.Config{
		Limits:  limits,
		NowFunc: func() time.Time { return time.Unix(0, ft.now.Load()) },
	})
	srv.Start()
	t.Cleanup(srv.Close)
	ft.Server = srv
	return ft
}

// stamp is the bubble side of fakeTelegram: a RoundTripper that stamps the
// time and sends on a connection of its own (no keep-alive, so no
// connection goroutine outlives the request inside the bubble).
type stamp struct {
	ft   *fakeTelegram
	base *http.Transport
}

func (s *stamp) RoundTrip(req *http.Request) (*http.Response, error) {
	s.ft.now.Store(time.Now().UnixNano())
	return s.base.RoundTrip(req)
}

// botClient returns the app's client: the throttle transport over stamp.
func (ft *fakeTelegram) botClient(l *throttle.Limiter) *http.Client {
	return &http.Client{Transport: throttle.NewTransport(l, &stamp{ft: ft, base: &http.Transport{DisableKeepAlives: true}})}
}

type answer struct {
	status    int
	outcome   wire.Outcome
	body      envelope
	elapsed   time.Duration
	messageID int64
}

type envelope struct {
	OK          bool   `json:"ok"`
	ErrorCode   int    `json:"error_code"`
	Description string `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
	Result struct {
		MessageID int64 `json:"message_id"`
	} `json:"result"`
}

// sendJSON posts sendMessage as JSON, as most libraries do.
func sendJSON(t *testing.T, c *http.Client, ft *fakeTelegram, chat int64, text string) answer {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"chat_id": chat, "text": text})
	start := time.Now()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ft.URL+"/bot"+ft.Token+"/sendMessage", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return do(t, c, req, start)
}

func do(t *testing.T, c *http.Client, req *http.Request, start time.Time) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("send: %v", err)
		return answer{}
	}
	defer resp.Body.Close()
	var a answer
	a.status, a.outcome, a.elapsed = resp.StatusCode, wire.OutcomeOf(resp.Header), time.Since(start)
	if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
		t.Errorf("answer: %v", err)
	}
	a.messageID = a.body.Result.MessageID
	return a
}

type observed struct {
	mu     sync.Mutex
	events []throttle.Event
}

func (o *observed) observe(e throttle.Event) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
}

func (o *observed) count(k throttle.EventKind) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, e := range o.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// With Telegram's limits on both sides, a group that floods and forty
// private chats that flood do not hold back a quiet private chat beyond
// its own limit, no 429 reaches the app, Telegram refuses nothing, and
// every chat receives its messages in the order they were sent.
func TestTransportFairnessAgainstTelegram(t *testing.T) {
	t.Parallel()
	ft := newFakeTelegram(t, telegramtest.Limits{}) // Telegram's: 30/s, 1/s per chat with bursts of 5, 20/min per group
	u := ft.NewUser("quiet")
	quiet, _ := ft.NewPrivateChat(u)
	group, _ := ft.NewGroup("flood")
	var privates []telegramtest.Chat
	for i := range 40 {
		c, _ := ft.NewPrivateChat(ft.NewUser(fmt.Sprintf("u%d", i)))
		privates = append(privates, c)
	}
	synctest.Test(t, func(t *testing.T) {
		var obs observed
		l := newLimiter(t, throttle.Config{
			Chat:     throttle.Limit{Count: 1, Per: time.Second}, // no burst: within any server's per-chat limit
			MaxWait:  2 * time.Minute,
			Observer: throttle.Observer{EventFunc: obs.observe},
		})
		client := ft.botClient(l)
		start := time.Now()
		var wg sync.WaitGroup
		var status sync.Map
		flood := func(chat int64, n int) {
			for i := range n {
				wg.Go(func() {
					a := sendJSON(t, client, ft, chat, fmt.Sprintf("%d", i))
					status.Store(fmt.Sprintf("%d/%d", chat, i), a.status)
				})
				synctest.Wait() // message i asks before message i+1
			}
		}
		flood(group.ID, 25)
		for _, p := range privates {
			flood(p.ID, 5)
		}
		time.Sleep(2 * time.Second) // the flood holds the bot-wide budget
		var worst time.Duration
		for i := range 3 {
			a := sendJSON(t, client, ft, quiet.ID, fmt.Sprintf("quiet %d", i))
			if a.status != http.StatusOK {
				t.Errorf("quiet reply %d: %d %+v", i, a.status, a.body)
			}
			worst = max(worst, a.elapsed)
			time.Sleep(1500 * time.Millisecond)
		}
		wg.Wait()
		t.Logf("quiet chat's worst wait %v; flood took %v", worst, time.Since(start))
		if worst > time.Second {
			t.Errorf("quiet chat's reply waited %v behind the flood, want at most its own 1s", worst)
		}
		status.Range(func(k, v any) bool {
			if v.(int) != http.StatusOK {
				t.Errorf("send %v answered %d", k, v)
			}
			return true
		})
		if n := obs.count(throttle.EventTooManyRequests); n != 0 {
			t.Errorf("Telegram answered 429 %d times", n)
		}
	})
	for _, c := range append(privates, group) {
		msgs := ft.MessagesTo(c.ID)
		for i, m := range msgs {
			if m.Text != fmt.Sprint(i) {
				t.Fatalf("chat %d received %q as message %d: order not kept", c.ID, m.Text, i)
			}
		}
	}
	if n := len(ft.MessagesTo(group.ID)); n != 25 {
		t.Errorf("group received %d of 25", n)
	}
}

// The limiter's default burst (3 per 3 s) against a server that allows
// none: Telegram's 429 pauses the chat, the call is retried when the pause
// ends, the app sees no 429 and the order holds.
func TestTransport429PauseAndResume(t *testing.T) {
	t.Parallel()
	ft := newFakeTelegram(t, telegramtest.Limits{Chat: telegramtest.Limit{Count: 1, Per: time.Second}}) // no burst
	chat, _ := ft.NewPrivateChat(ft.NewUser("burst"))
	synctest.Test(t, func(t *testing.T) {
		var obs observed
		l := newLimiter(t, throttle.Config{Observer: throttle.Observer{EventFunc: obs.observe}})
		client := ft.botClient(l)
		var wg sync.WaitGroup
		answers := make([]answer, 3)
		for i := range 3 {
			wg.Go(func() { answers[i] = sendJSON(t, client, ft, chat.ID, fmt.Sprint(i)) })
			synctest.Wait()
		}
		wg.Wait()
		for i, a := range answers {
			if a.status != http.StatusOK {
				t.Errorf("send %d: %d %+v", i, a.status, a.body)
			}
		}
		if obs.count(throttle.EventTooManyRequests) == 0 {
			t.Error("no 429 from the server: the test did not exercise the pause")
		}
		if answers[2].elapsed < 2*time.Second {
			t.Errorf("third send took %v; the server allows 1/s", answers[2].elapsed)
		}
	})
	for i, m := range ft.MessagesTo(chat.ID) {
		if m.Text != fmt.Sprint(i) {
			t.Fatalf("message %d is %q: order not kept", i, m.Text)
		}
	}
}

// A call that cannot go within MaxWait gets a Telegram-shaped 429 marked
// as tgrelay's, at once when its chat's answered sends show it, and never
// reaches Telegram.
func TestTransportMaxWaitAnswers429(t *testing.T) {
	t.Parallel()
	ft := newFakeTelegram(t, telegramtest.Limits{Chat: telegramtest.Limit{Count: 1, Per: 10 * time.Second}})
	chat, _ := ft.NewPrivateChat(ft.NewUser("slow"))
	synctest.Test(t, func(t *testing.T) {
		var obs observed
		l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: 10 * time.Second}, MaxWait: 3 * time.Second, Observer: throttle.Observer{EventFunc: obs.observe}})
		client := ft.botClient(l)
		if a := sendJSON(t, client, ft, chat.ID, "first"); a.status != http.StatusOK {
			t.Fatalf("first send: %d", a.status)
		}
		a := sendJSON(t, client, ft, chat.ID, "second")
		if a.status != http.StatusTooManyRequests || a.outcome != wire.OutcomeThrottled {
			t.Fatalf("second send: %d %q, want 429 marked throttled", a.status, a.outcome)
		}
		// Its turn is 10 s away, beyond MaxWait: answered at once, with
		// the time to its turn.
		if a.body.OK || a.body.ErrorCode != 429 || a.body.Parameters.RetryAfter != 10 || a.body.Description != "Too Many Requests: retry after 10" {
			t.Fatalf("429 body %+v, want Telegram's shape with retry_after 10", a.body)
		}
		if a.elapsed != 0 {
			t.Errorf("answered after %v, want at once", a.elapsed)
		}
		if obs.count(throttle.EventRefused) != 1 {
			t.Errorf("refusals observed: %d", obs.count(throttle.EventRefused))
		}
	})
	if msgs := ft.MessagesTo(chat.ID); len(msgs) != 1 {
		t.Fatalf("Telegram received %d messages, want only the first", len(msgs))
	}
}

// Form bodies and query parameters name the chat as well as JSON does;
// uncounted methods pass without waiting.
func TestTransportFormAndQuery(t *testing.T) {
	t.Parallel()
	ft := newFakeTelegram(t, telegramtest.Limits{})
	chat, _ := ft.NewPrivateChat(ft.NewUser("form"))
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Second}})
		client := ft.botClient(l)
		start := time.Now()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ft.URL+"/bot"+ft.Token+"/sendMessage",
			strings.NewReader(fmt.Sprintf("chat_id=%d&text=one", chat.ID)))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if a := do(t, client, req, start); a.status != http.StatusOK {
			t.Fatalf("form send: %d %+v", a.status, a.body)
		}
		req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("%s/bot%s/sendMessage?chat_id=%d&text=two", ft.URL, ft.Token, chat.ID), nil)
		if a := do(t, client, req, start); a.status != http.StatusOK || a.elapsed != time.Second {
			t.Fatalf("query send: %d after %v, want 200 after the chat's 1s", a.status, a.elapsed)
		}
		for range 5 {
			req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, ft.URL+"/bot"+ft.Token+"/getMe", nil)
			if a := do(t, client, req, time.Now()); a.status != http.StatusOK || a.elapsed != 0 {
				t.Fatalf("getMe: %d after %v", a.status, a.elapsed)
			}
		}
	})
}

// No error of the transport holds the token (the URL carries it).
func TestTransportErrorsHoldNoToken(t *testing.T) {
	t.Parallel()
	const token = "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Minute}, MaxWait: time.Minute})
	tr := throttle.NewTransport(l, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(`{"ok":true}`)), Header: http.Header{}}, nil
	}))
	post := func(ctx context.Context, body io.Reader) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.telegram.org/bot"+token+"/sendMessage", body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := post(t.Context(), strings.NewReader(`{"chat_id":5}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := post(ctx, strings.NewReader(`{"chat_id":5}`))
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "AAAA") {
		t.Fatalf("waiting error %q: want the deadline, without the token", err)
	}
	var waited interface{ NotDispatched() bool }
	if !errors.As(err, &waited) || !waited.NotDispatched() {
		t.Fatalf("waiting error %q: want not dispatched (nothing was sent)", err)
	}
	err = post(t.Context(), io.MultiReader(strings.NewReader(`{"chat_i`), errReader{}))
	var nd interface{ NotDispatched() bool }
	if err == nil || !errors.As(err, &nd) || !nd.NotDispatched() || strings.Contains(err.Error(), "AAAA") {
		t.Fatalf("body error %q: want not dispatched, without the token", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("client body failed") }

// A 429 for a body the transport cannot send again (streamed past the peek
// bound, no GetBody) goes back to the app as Telegram wrote it; the pause
// still holds the chat's next call.
func TestTransport429NotReplayable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		tr := throttle.NewTransport(newLimiter(t, throttle.Config{}), roundTripFunc(func(r *http.Request) (*http.Response, error) {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			body := `{"ok":true,"result":{"message_id":1}}`
			status := 200
			if calls.Add(1) == 1 {
				status, body = 429, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}`
			}
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}, nil
		}))
		post := func(body io.Reader) (int, string) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://tg/bot1:x/sendMessage", body)
			req.Header.Set("Content-Type", "application/json")
			req.GetBody = nil
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		big := `{"chat_id":77,"text":"` + strings.Repeat("x", throttle.MaxPeekBytes) + `"}`
		status, body := post(io.MultiReader(strings.NewReader(big))) // no GetBody: not replayable
		if status != 429 || !strings.Contains(body, `"retry_after":5`) || calls.Load() != 1 {
			t.Fatalf("got %d %q after %d calls, want Telegram's 429 passed through, sent once", status, body, calls.Load())
		}
		start := time.Now()
		if status, _ := post(strings.NewReader(`{"chat_id":77,"text":"y"}`)); status != 200 {
			t.Fatalf("next call: %d", status)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("next call to the chat went after %v, want the 5s pause", d)
		}
	})
}

// A multipart body whose file comes before chat_id, beyond the peek bound,
// is sent unchanged and counts against the bot-wide limit only.
func TestTransportChatIDBeyondPeek(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("document", "a.bin")
	fw.Write(bytes.Repeat([]byte{1}, 2*throttle.MaxPeekBytes))
	mw.WriteField("chat_id", "42")
	mw.Close()
	want := bytes.Clone(buf.Bytes())
	req, _ := http.NewRequest(http.MethodPost, "http://tg/bot1:x/sendDocument", io.MultiReader(&buf))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	chat, found, _, body, _, err := throttle.Inspect(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(body)
	if found || chat != 0 || !bytes.Equal(got, want) {
		t.Fatalf("chat %d found %v, body intact %v: want no chat and the body unchanged", chat, found, bytes.Equal(got, want))
	}
}
