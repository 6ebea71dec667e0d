package operator_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/operator"
	"github.com/tgrelay/tgrelay/transport"
)

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

// Reference §5.6 case 5, plain text: a long text is cut to exactly 4096
// UTF-16 units, the last being the ellipsis.
func TestPlainTextCut(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, _ := newChannel(t, client, operator.Config{MinInterval: time.Second})
		ch.Post(strings.Repeat("x", 5000), "")
		ch.Post(strings.Repeat("😀", 3000), "") // 6000 units in 3000 code points
		ch.Post("short 😀", "")
		drain(t, ch)
		texts := srv.Texts()
		if len(texts) != 3 {
			t.Fatalf("sent %d", len(texts))
		}
		if want := strings.Repeat("x", 4095) + "…"; texts[0] != want {
			t.Errorf("ASCII cut to %d units", utf16Len(texts[0]))
		}
		// Beyond the reference: counted in UTF-16 units, never splitting a
		// surrogate pair (4094 units of emoji, then the ellipsis).
		if want := strings.Repeat("😀", 2047) + "…"; texts[1] != want {
			t.Errorf("emoji cut to %d units (%d code points)", utf16Len(texts[1]), utf8.RuneCountInString(texts[1]))
		}
		if texts[2] != "short 😀" {
			t.Errorf("short text changed: %q", texts[2])
		}
	})
}

// Reference §5.6 case 5, HTML: truncation counts visible text, keeps the
// markup valid and sanitises.
func TestHTMLCut(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, _ := newChannel(t, client, operator.Config{MinInterval: time.Second, ParseMode: operator.ParseModeHTML,
			Dedupe: &operator.DedupeConfig{RepeatedLineFunc: func(n int) string { return "<+more>" }}})
		ch.Post("<b>"+strings.Repeat("x", 5000)+"</b>", "")
		// The reference cut by code points first, which left "&lt;…"; we
		// cut the visible text once, so the bold run survives, shortened.
		ch.Post(strings.Repeat("y", 4094)+"<b>bold</b>", "")
		ch.Post("<blink>odd</blink> & <i>fine</i>", "")
		ch.Post("<blink>odd</blink> & <i>fine</i>", "a")
		drain(t, ch)
		calls := srv.Calls()
		want := []string{
			"<b>" + strings.Repeat("x", 4095) + "</b>…",
			strings.Repeat("y", 4094) + "<b>b</b>…",
			"odd &amp; <i>fine</i>",
			"odd &amp; <i>fine</i>",
		}
		for i, c := range calls {
			if c.Parse != "HTML" {
				t.Errorf("call %d parse_mode %q", i, c.Parse)
			}
			if i < len(want) && c.Text != want[i] {
				t.Errorf("call %d text %.60q…, want %.60q…", i, c.Text, want[i])
			}
		}
		if len(calls) != len(want) {
			t.Errorf("%d calls, want %d", len(calls), len(want))
		}
	})
}

// The bot token (by shape, and the client's exact token), configured
// patterns and values never reach Telegram nor a drop.
func TestMaskingTokenAndPatterns(t *testing.T) {
	srv := newBotServer(t, refusal(400, "Bad Request: something new", ""))
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{
			SensitivePatterns: []*regexp.Regexp{regexp.MustCompile(`(?i)password=\S+`)},
			SensitiveValues:   []string{"sk_live_42"},
		})
		text := "GET https://api.telegram.org/bot" + testToken + "/getMe failed; Password=hunter2 key sk_live_42 other 987654:" + strings.Repeat("Z", 35)
		ch.Post(text, "")
		ch.Post(text+" again", "")
		drain(t, ch)
		want := "GET https://api.telegram.org/bot1234567890:[redacted]/getMe failed; [redacted] key [redacted] other 987654:[redacted]"
		if got := srv.Texts(); len(got) != 2 || got[0] != want || got[1] != want+" again" {
			t.Errorf("sent %q\nwant %q", got, want)
		}
		all := d.All()
		if len(all) != 1 || all[0].Text != want || all[0].Reason != operator.DropRefused || all[0].Failure.Status != 400 {
			t.Errorf("drops %+v", all)
		}
	})
}

// The client's exact token is masked even when it is too short to have a
// token's shape.
func TestMaskingShortClientToken(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, err := botapi.New("7:tiny", botapi.Config{APIRoot: srv.URL, HTTPClient: newClientHTTP()})
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := newChannel(t, client, operator.Config{})
		ch.Post("leaked 7:tiny here", "")
		drain(t, ch)
		if got := srv.Texts(); !slices.Equal(got, []string{"leaked 7:[redacted] here"}) {
			t.Errorf("sent %q", got)
		}
	})
}

// Reference §5.5 case 6: a refusal through the standard sender: the request
// URL, an *APIError without the token, classified from its parameters.
func TestClientRefusalCarriesNoToken(t *testing.T) {
	srv := newBotServer(t, refusal(429, "Too Many Requests: retry after 3", `{"retry_after":3}`))
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{MaxAttempts: 1})
		ch.Post("x", "")
		drain(t, ch)
		if p := srv.Calls()[0].Path; p != "/bot"+testToken+"/sendMessage" {
			t.Errorf("path %q", p)
		}
		all := d.All()
		if len(all) != 1 || all[0].Reason != operator.DropAttempts {
			t.Fatalf("drops %+v", all)
		}
		if f := all[0].Failure; f.Reason != botapi.ReasonRateLimited || f.RetryAfter != 3*time.Second || f.Evidence != botapi.EvidenceParameters {
			t.Errorf("failure %+v", f)
		}
	})
}

// Reference §5.1 case 14 with the real transport: a send whose connection
// was refused was not dispatched, so the channel sends it again.
func TestNotDispatchedIsResent(t *testing.T) {
	t.Parallel()
	srv := newBotServer(t)
	var dials atomic.Int32
	httpClient, err := transport.NewClient(transport.Config{
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil },
		DialFunc: func(ctx context.Context, network, address string) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return nil, errors.New("connection refused (first dial)")
			}
			return (&net.Dialer{}).DialContext(ctx, network, address)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	client, err := botapi.New(testToken, botapi.Config{APIRoot: srv.URL, HTTPClient: httpClient})
	if err != nil {
		t.Fatal(err)
	}
	var failures []botapi.Failure
	var mu sync.Mutex
	ch, d := newChannel(t, nil, operator.Config{MinInterval: time.Millisecond, SendFunc: func(ctx context.Context, m operator.Message) error {
		_, err := client.Call(ctx, "sendMessage", map[string]any{"chat_id": m.ChatID, "text": m.Text})
		if err != nil {
			mu.Lock()
			failures = append(failures, botapi.Classify(err))
			mu.Unlock()
		}
		return err
	}})
	ch.Post("never left", "")
	drain(t, ch)
	if got := srv.Texts(); !slices.Equal(got, []string{"never left"}) {
		t.Errorf("server got %q, want the message once", got)
	}
	if len(failures) != 1 || failures[0].Reason != botapi.ReasonNotDispatched {
		t.Errorf("failures %+v, want one not-dispatched", failures)
	}
	if len(d.All()) != 0 {
		t.Errorf("drops %v", d.Summary())
	}
}

// Every message posted concurrently is either sent or reported dropped.
func TestConcurrentPostsAccounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sentN atomic.Int32
		d := &drops{}
		ch, err := operator.New(operator.Config{ChatID: 1, MaxQueued: 5, MinInterval: time.Millisecond, OnDrop: d.add,
			SendFunc: func(ctx context.Context, m operator.Message) error {
				sentN.Add(1)
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 50 {
					ch.Post("m", string(rune('a'+g))+string(rune('0'+i%10)))
				}
			})
		}
		wg.Wait()
		drain(t, ch)
		ch.Close()
		if total := int(sentN.Load()) + len(d.All()); total != 400 {
			t.Errorf("sent %d + dropped %d = %d, want 400", sentN.Load(), len(d.All()), total)
		}
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	send := func(context.Context, operator.Message) error { return nil }
	client, err := botapi.New(testToken, botapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cfg   operator.Config
		field string
	}{
		{operator.Config{SendFunc: send}, "ChatID"},
		{operator.Config{ChatID: 1}, "SendFunc"},
		{operator.Config{ChatID: 1, SendFunc: send, Client: client}, "SendFunc"},
		{operator.Config{ChatID: 1, SendFunc: send, ParseMode: "MarkdownV2"}, "ParseMode"},
		{operator.Config{ChatID: 1, SendFunc: send, Topics: map[string]int64{"x": 0}}, "Topics"},
		{operator.Config{ChatID: 1, SendFunc: send, MaxQueued: -1}, "MaxQueued"},
		{operator.Config{ChatID: 1, SendFunc: send, MaxAttempts: operator.MaxMaxAttempts + 1}, "MaxAttempts"},
		{operator.Config{ChatID: 1, SendFunc: send, MinInterval: -time.Second}, "MinInterval"},
		{operator.Config{ChatID: 1, SendFunc: send, SendTimeout: -time.Second}, "SendTimeout"},
		{operator.Config{ChatID: 1, SendFunc: send, SensitivePatterns: []*regexp.Regexp{regexp.MustCompile(`x*`)}}, "SensitivePatterns"},
		{operator.Config{ChatID: 1, SendFunc: send, SensitivePatterns: []*regexp.Regexp{nil}}, "SensitivePatterns"},
		{operator.Config{ChatID: 1, SendFunc: send, Dedupe: &operator.DedupeConfig{Window: -1}}, "Window"},
	}
	for _, tt := range tests {
		_, err := operator.New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tt.cfg, err, tt.field)
		}
	}
}

// A text larger than MaxPostBytes is kept only up to that bound while
// queued (seen in the drop of a queued message), on a rune boundary.
func TestPostBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &drops{}
		ch, err := operator.New(operator.Config{ChatID: 1, OnDrop: d.add, SendFunc: func(ctx context.Context, m operator.Message) error {
			<-ctx.Done()
			return ctx.Err()
		}})
		if err != nil {
			t.Fatal(err)
		}
		ch.Post("blocker", "")
		ch.Post("a"+strings.Repeat("é", operator.MaxPostBytes), "") // 2 bytes each
		synctest.Wait()
		ch.Close()
		all := d.All()
		if len(all) != 2 || all[0].Reason != operator.DropClosed {
			t.Fatalf("drops %v", d.Summary())
		}
		if got := all[0].Text; len(got) != operator.MaxPostBytes-1 || !utf8.ValidString(got) {
			t.Errorf("queued text kept %d bytes (valid UTF-8: %t), want %d", len(got), utf8.ValidString(got), operator.MaxPostBytes-1)
		}
	})
}
