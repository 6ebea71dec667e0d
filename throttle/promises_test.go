package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/wire"
)

// Tests of promises of the package doc that the other tests left
// unchecked (found by a mutation campaign): each names the promise.

// grantedAtOnce reports whether a Wait of chat is granted without any
// virtual time passing; it finishes the permit with Done.
func grantedAtOnce(t *testing.T, l *throttle.Limiter, method string, chat int64, paid bool) bool {
	t.Helper()
	start := time.Now()
	var p *throttle.Permit
	var err error
	if paid {
		p, err = l.WaitPaid(t.Context(), method, chat)
	} else {
		p, err = l.Wait(t.Context(), method, chat)
	}
	if err != nil {
		t.Errorf("Wait(%s, %d): %v", method, chat, err)
		return false
	}
	p.Done()
	return time.Since(start) == 0
}

// "A counted call with no chat_id (an inline message's edit) counts
// against Bot only": no per-chat limit, and no one-at-a-time order (there
// is no chat to keep an order in).
func TestNoChatCountsAgainstBotOnly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Bot: throttle.Limit{Count: 1000, Per: time.Second}})
		start := time.Now()
		for range 3 * throttle.DefaultChatCount {
			p, err := l.Wait(t.Context(), "editMessageText", 0)
			if err != nil {
				t.Fatal(err)
			}
			p.Done()
		}
		// 15 sends at 1000/s: 13 intervals of 1 ms, no per-chat window.
		if d := time.Since(start); d != 13*time.Millisecond {
			t.Fatalf("15 edits with no chat took %v, want 13ms (the bot-wide spacing only)", d)
		}

		// A no-chat call in flight does not hold the next one.
		time.Sleep(time.Second)
		held, err := l.Wait(t.Context(), "editMessageText", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Done()
		if !grantedAtOnce(t, l, "editMessageText", 0, false) {
			t.Fatal("a no-chat call waited for another no-chat call in flight")
		}
	})
}

// A paid call is spaced by Config.Paid instead of Config.Bot: an exhausted
// Bot budget does not hold it, nor its retry after Telegram's 429.
func TestPaidIgnoresExhaustedBot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Bot: throttle.Limit{Count: 1, Per: time.Hour}, MaxWait: 10 * time.Second})
		send(t, l, 1) // the Bot budget is spent for an hour
		if !grantedAtOnce(t, l, "sendMessage", 2, true) {
			t.Fatal("a paid call waited for the spent Bot budget")
		}
		p, err := l.WaitPaid(t.Context(), "sendMessage", 3)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := p.Retry(t.Context(), 2*time.Second); err != nil {
			t.Fatalf("paid retry: %v, want granted after the 2s pause", err)
		}
		p.Done()
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("paid retry granted after %v, want 2s", d)
		}
	})
}

// A retry is let in when Config.MaxQueue calls wait: it was counted in
// the bound once already.
func TestRetryIgnoresFullQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{MaxQueue: 1, Chat: throttle.Limit{Count: 1, Per: time.Minute}, MaxWait: 2 * time.Minute})
		p, err := l.Wait(t.Context(), "sendMessage", 1)
		if err != nil {
			t.Fatal(err)
		}
		send(t, l, 2)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Wait(ctx, "sendMessage", 2) // waits for chat 2's minute: the queue is full
		}()
		synctest.Wait()
		if n := l.Stats().Waiting; n != 1 {
			t.Fatalf("%d waiting, want 1", n)
		}
		if err := p.Retry(t.Context(), time.Second); err != nil {
			t.Fatalf("Retry with the queue full: %v, want granted", err)
		}
		p.Done()
		cancel()
		<-done
	})
}

// "Calls that cannot outwait a pause within their MaxWait are refused at
// once": the bot-wide pause too.
func TestBotPauseBeyondMaxWaitRefusesAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{MaxWait: 5 * time.Second})
		a, _ := l.Wait(t.Context(), "sendMessage", 1)
		b, _ := l.Wait(t.Context(), "sendMessage", 2)
		a.Limited(30 * time.Second)
		if s := b.Limited(30 * time.Second); s != throttle.ScopeBot {
			t.Fatalf("second chat's 429 paused %q, want bot", s)
		}
		start := time.Now()
		_, err := l.Wait(t.Context(), "sendMessage", 3)
		var werr *throttle.WaitError
		if !errors.As(err, &werr) || werr.Reason != throttle.ReasonPaused || werr.RetryAfter != 30*time.Second {
			t.Fatalf("Wait: %v, want refused (paused), retry after 30s", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("refused after %v, want at once", d)
		}
	})
}

// The scope of Telegram's 429 (package doc, "429"): a call that names no
// chat pauses the bot; the same chat refused twice is still the chat's
// limit; a second chat refused after the first chat's pause ended is its
// own; a second chat refused while the first chat's pause runs pauses the
// bot, even when a bot-wide pause came and went in between.
func TestTelegram429Scope(t *testing.T) {
	t.Parallel()
	wait := func(t *testing.T, l *throttle.Limiter, chat int64) *throttle.Permit {
		t.Helper()
		method := "sendMessage"
		if chat == 0 {
			method = "editMessageText"
		}
		p, err := l.Wait(t.Context(), method, chat)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("no chat", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, throttle.Config{})
			if s := wait(t, l, 0).Limited(3 * time.Second); s != throttle.ScopeBot {
				t.Fatalf("a no-chat 429 paused %q, want bot", s)
			}
			if d := send(t, l, 5); d != 3*time.Second {
				t.Fatalf("a chat waited %v after a no-chat 429, want the bot's 3s pause", d)
			}
		})
	})
	t.Run("same chat twice", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, throttle.Config{})
			if s := wait(t, l, 1).Limited(0); s != throttle.ScopeChat {
				t.Fatalf("first 429 paused %q, want chat", s)
			}
			// retry_after 0 leaves no pause: the chat goes again at once,
			// while the remembered pause (until now) has not ended.
			if s := wait(t, l, 1).Limited(3 * time.Second); s != throttle.ScopeChat {
				t.Fatalf("the same chat's second 429 paused %q, want chat", s)
			}
			if d := send(t, l, 2); d != 0 {
				t.Fatalf("another chat waited %v", d)
			}
		})
	})
	t.Run("after the pause ended", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, throttle.Config{})
			wait(t, l, 1).Limited(2 * time.Second)
			time.Sleep(2 * time.Second)
			if s := wait(t, l, 2).Limited(2 * time.Second); s != throttle.ScopeChat {
				t.Fatalf("a 429 after the first chat's pause ended paused %q, want chat", s)
			}
		})
	})
	t.Run("first chat's pause still runs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, throttle.Config{})
			a, b := wait(t, l, 1), wait(t, l, 2)
			a.Limited(10 * time.Second)
			if s := b.Limited(2 * time.Second); s != throttle.ScopeBot {
				t.Fatalf("second chat's 429 paused %q, want bot", s)
			}
			c := wait(t, l, 3) // granted when the bot's 2s pause ends
			if s := c.Limited(time.Second); s != throttle.ScopeBot {
				t.Fatalf("a third chat refused while the first chat's 10s pause runs paused %q, want bot", s)
			}
		})
	})
}

// Permit.Retry waits "within the call's original MaxWait": a pause that
// outlasts what is left of it refuses the retry at once.
func TestRetryKeepsTheOriginalDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{MaxWait: 5 * time.Second})
		p, err := l.Wait(t.Context(), "sendMessage", 4)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		start := time.Now()
		err = p.Retry(t.Context(), 3*time.Second) // the pause ends 2s after the deadline
		var werr *throttle.WaitError
		if !errors.As(err, &werr) || werr.Reason != throttle.ReasonPaused {
			t.Fatalf("Retry: %v, want refused (paused)", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("refused after %v, want at once", d)
		}
	})
}

// RetryAfter is "in whole seconds", rounded up: a turn 2.5 s away is
// answered with 3 s, never with a time at which the call would still be
// refused.
func TestRetryAfterRoundsUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: -1}, Group: throttle.Limit{Count: 1, Per: 10 * time.Second}, MaxWait: time.Second})
		send(t, l, -5)
		time.Sleep(7500 * time.Millisecond)
		_, err := l.Wait(t.Context(), "sendMessage", -5)
		var werr *throttle.WaitError
		if !errors.As(err, &werr) || werr.RetryAfter != 3*time.Second {
			t.Fatalf("Wait: %v, want refused with retry after 3s (2.5s rounded up)", err)
		}
	})
}

// The package doc's table of counted methods, exactly.
func TestCountedMethodsTable(t *testing.T) {
	t.Parallel()
	counted := strings.Fields(`sendMessage sendPhoto sendAudio sendDocument sendVideo sendAnimation
		sendVoice sendVideoNote sendPaidMedia sendMediaGroup sendLocation
		sendVenue sendContact sendPoll sendChecklist sendDice sendSticker
		sendInvoice sendGame
		copyMessage copyMessages forwardMessage forwardMessages
		editMessageText editMessageCaption editMessageMedia
		editMessageLiveLocation stopMessageLiveLocation
		editMessageReplyMarkup editMessageChecklist stopPoll`)
	for _, m := range counted {
		if !throttle.Counts(m) || !throttle.Counts(strings.ToLower(m)) {
			t.Errorf("Counts(%q) = false, want true (the doc's table)", m)
		}
	}
	got := throttle.CountedMethods()
	want := append([]string(nil), counted...)
	if len(got) != len(want) {
		t.Fatalf("CountedMethods has %d methods, the doc's table %d: %v", len(got), len(want), got)
	}
	seen := map[string]bool{}
	for _, m := range got {
		seen[m] = true
	}
	for _, m := range want {
		if !seen[m] {
			t.Errorf("CountedMethods lacks %s", m)
		}
	}
	for _, m := range strings.Fields(`getMe getUpdates answerCallbackQuery answerInlineQuery sendChatAction deleteMessage getFile setWebhook`) {
		if throttle.Counts(m) {
			t.Errorf("Counts(%q) = true, want false", m)
		}
	}
}

// The defaults are Telegram's limits and the documented bounds; a bound
// itself is a valid setting, one past it is not.
func TestConfigDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	c := newLimiter(t, throttle.Config{}).Config()
	for name, got := range map[string]throttle.Limit{"Bot": c.Bot, "Paid": c.Paid, "Chat": c.Chat, "Group": c.Group} {
		want := map[string]throttle.Limit{
			"Bot":   {Count: 30, Per: time.Second},
			"Paid":  {Count: 1000, Per: time.Second},
			"Chat":  {Count: 5, Per: 5 * time.Second},
			"Group": {Count: 20, Per: time.Minute},
		}[name]
		if got != want {
			t.Errorf("default %s = %+v, want %+v", name, got, want)
		}
	}
	if c.MaxWait != time.Minute || c.MaxQueue != 10000 || c.MaxHold != 2*time.Minute {
		t.Errorf("defaults MaxWait %v, MaxQueue %d, MaxHold %v; want 1m, 10000, 2m", c.MaxWait, c.MaxQueue, c.MaxHold)
	}
	for _, ok := range []throttle.Config{{MaxWait: throttle.MaxMaxWait}, {MaxQueue: throttle.MaxMaxQueue}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v, want valid (at the bound)", ok, err)
		}
	}
	if err := (throttle.Config{MaxQueue: throttle.MaxMaxQueue + 1}).Validate(); err == nil {
		t.Error("MaxQueue beyond MaxMaxQueue is valid")
	}
}

// Transport tests: a scripted Telegram (Base) in a synctest bubble.

type scripted struct {
	calls   atomic.Int32
	answers []func(r *http.Request) (*http.Response, error) // by call; the last repeats
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	n := int(s.calls.Add(1)) - 1
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return s.answers[min(n, len(s.answers)-1)](r)
}

func reply(status int, body string, header ...string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
}

const okAnswer = `{"ok":true,"result":{"message_id":1}}`

func tooMany(secs string) string {
	return `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after ` + secs + `","parameters":{"retry_after":` + secs + `}}`
}

// roundTrip posts body to method through tr and returns the status, the
// outcome header, the answer and how long it took.
func roundTrip(t *testing.T, ctx context.Context, tr http.RoundTripper, method, body string) (int, wire.Outcome, string, time.Duration, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://tg.invalid/bot1:x/"+method, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, "", "", time.Since(start), err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, wire.OutcomeOf(resp.Header), string(b), time.Since(start), nil
}

// Transport reads allow_paid_broadcast: a paid call is not held by a spent
// Bot budget.
func TestTransportPaidBroadcast(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Bot: throttle.Limit{Count: 1, Per: time.Hour}, MaxWait: 10 * time.Second})
		tr := throttle.NewTransport(l, &scripted{answers: []func(*http.Request) (*http.Response, error){reply(200, okAnswer)}})
		send(t, l, 1)
		status, _, _, d, err := roundTrip(t, t.Context(), tr, "sendMessage", `{"chat_id":2,"text":"x","allow_paid_broadcast":true}`)
		if err != nil || status != 200 || d != 0 {
			t.Fatalf("paid call: %d %v after %v, want 200 at once", status, err, d)
		}
	})
}

// Telegram's 429 is retried after exactly its retry_after (from the JSON,
// or else from the Retry-After header), and one whose retry_after outlasts
// the call's MaxWait goes back as Telegram wrote it, not as the limiter's
// own 429, with the chat paused for it.
func TestTransportTelegram429Timing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(*http.Request) (*http.Response, error)
		want   time.Duration
	}{
		{"retry_after", reply(429, tooMany("2")), 2 * time.Second},
		{"Retry-After header", reply(429, `{"ok":false,"error_code":429,"description":"Too Many Requests"}`, "Retry-After", "3"), 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{answers: []func(*http.Request) (*http.Response, error){tc.answer, reply(200, okAnswer)}}
				tr := throttle.NewTransport(newLimiter(t, throttle.Config{}), base)
				status, _, _, d, err := roundTrip(t, t.Context(), tr, "sendMessage", `{"chat_id":5,"text":"x"}`)
				if err != nil || status != 200 || d != tc.want || base.calls.Load() != 2 {
					t.Fatalf("%d %v after %v, %d calls; want 200 after %v, 2 calls", status, err, d, base.calls.Load(), tc.want)
				}
			})
		})
	}
	t.Run("beyond MaxWait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &scripted{answers: []func(*http.Request) (*http.Response, error){reply(429, tooMany("30")), reply(200, okAnswer)}}
			tr := throttle.NewTransport(newLimiter(t, throttle.Config{MaxWait: 10 * time.Second}), base)
			status, outcome, body, d, err := roundTrip(t, t.Context(), tr, "sendMessage", `{"chat_id":5,"text":"x"}`)
			if err != nil || status != 429 || outcome == wire.OutcomeThrottled || body != tooMany("30") || d != 0 {
				t.Fatalf("%d %q %q %v after %v; want Telegram's 429 as it came, at once", status, outcome, body, err, d)
			}
			// The chat is paused for the 30 s: its next call is refused at once.
			status, outcome, body, _, _ = roundTrip(t, t.Context(), tr, "sendMessage", `{"chat_id":5,"text":"y"}`)
			if status != 429 || outcome != wire.OutcomeThrottled || !strings.Contains(body, `"retry_after":30`) {
				t.Fatalf("next call: %d %q %q; want the limiter's 429, retry after 30", status, outcome, body)
			}
			if n := base.calls.Load(); n != 1 {
				t.Fatalf("Telegram got %d calls, want 1", n)
			}
		})
	})
}

// A retry the limiter refuses (the bot was paused meanwhile beyond the
// call's MaxWait) is answered with the limiter's 429 and its retry_after,
// not with Telegram's shorter one.
func TestTransportRetryRefusedByLimiter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{MaxWait: 10 * time.Second})
		base := &scripted{answers: []func(*http.Request) (*http.Response, error){
			func(r *http.Request) (*http.Response, error) {
				// Meanwhile two other chats are refused: the bot pauses 30 s.
				a, _ := l.Wait(context.Background(), "sendMessage", 1)
				b, _ := l.Wait(context.Background(), "sendMessage", 2)
				a.Limited(30 * time.Second)
				b.Limited(30 * time.Second)
				return reply(429, tooMany("1"))(r)
			},
			reply(200, okAnswer),
		}}
		tr := throttle.NewTransport(l, base)
		status, outcome, body, _, err := roundTrip(t, t.Context(), tr, "sendMessage", `{"chat_id":5,"text":"x"}`)
		if err != nil || status != 429 || outcome != wire.OutcomeThrottled || !strings.Contains(body, `"retry_after":30`) {
			t.Fatalf("%d %q %q %v; want the limiter's 429, retry after 30", status, outcome, body, err)
		}
		if n := base.calls.Load(); n != 1 {
			t.Fatalf("Telegram got %d calls, want 1", n)
		}
	})
}

type notDispatched struct{}

func (notDispatched) Error() string       { return "never left" }
func (notDispatched) NotDispatched() bool { return true }

// What counts through Transport: a call Base reports never sent does not;
// one that failed otherwise (it may have arrived), or that a proxy answered
// 429, does; one refused before sending (WithBeforeSend) does not, on the
// first send or on a resend after Telegram's 429.
func TestTransportWhatCounts(t *testing.T) {
	t.Parallel()
	fail := func(err error) func(*http.Request) (*http.Response, error) {
		return func(*http.Request) (*http.Response, error) { return nil, err }
	}
	refuse := func(after int) context.Context {
		runs := 0
		return throttle.WithBeforeSend(context.Background(), func() error {
			runs++
			if runs > after {
				return errors.New("gone")
			}
			return nil
		})
	}
	for _, tc := range []struct {
		name   string
		first  []func(*http.Request) (*http.Response, error)
		ctx    context.Context
		counts bool
	}{
		{"not dispatched", []func(*http.Request) (*http.Response, error){fail(notDispatched{})}, nil, false},
		{"failed", []func(*http.Request) (*http.Response, error){fail(errors.New("connection reset"))}, nil, true},
		{"proxy 429", []func(*http.Request) (*http.Response, error){reply(429, `<html>slow down</html>`, "Content-Type", "text/html")}, nil, true},
		{"refused before sending", []func(*http.Request) (*http.Response, error){reply(200, okAnswer)}, refuse(0), false},
		{"refused before resending", []func(*http.Request) (*http.Response, error){reply(429, tooMany("1"))}, refuse(1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{answers: append(tc.first, reply(200, okAnswer))}
				l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Minute}, MaxWait: 2 * time.Minute})
				tr := throttle.NewTransport(l, base)
				ctx := tc.ctx
				if ctx == nil {
					ctx = t.Context()
				}
				roundTrip(t, ctx, tr, "sendMessage", `{"chat_id":5,"text":"x"}`)
				if s := l.Stats(); s.Held != 0 || s.Waiting != 0 {
					t.Fatalf("stats %+v after the call, want nothing held", s)
				}
				want := time.Duration(0)
				if tc.counts {
					want = time.Minute
				}
				if d := send(t, l, 5); d != want {
					t.Fatalf("the chat's next call waited %v, want %v", d, want)
				}
			})
		})
	}
}

// The send is counted from the answer's first byte, not from when the
// transport's goroutine runs again.
func TestTransportCountsFromFirstByte(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: 10 * time.Second}, MaxWait: time.Minute})
		base := &scripted{answers: []func(*http.Request) (*http.Response, error){func(r *http.Request) (*http.Response, error) {
			if tr := httptrace.ContextClientTrace(r.Context()); tr != nil && tr.GotFirstResponseByte != nil {
				tr.GotFirstResponseByte()
			}
			time.Sleep(2 * time.Second) // the rest of the answer, slowly
			return reply(200, okAnswer)(r)
		}}}
		tr := throttle.NewTransport(l, base)
		start := time.Now()
		if status, _, _, _, err := roundTrip(t, t.Context(), tr, "sendMessage", `{"chat_id":5,"text":"x"}`); err != nil || status != 200 {
			t.Fatalf("%d %v", status, err)
		}
		send(t, l, 5)
		if d := time.Since(start); d != 10*time.Second {
			t.Fatalf("the chat's next call went %v after the first was sent, want 10s (its window from the first byte)", d)
		}
	})
}

// Transport reads allow_paid_broadcast from the query, a form and a
// multipart part before chat_id; "false" is not paid; a body of exactly
// MaxPeekBytes is read whole, so it can be sent again without GetBody.
func TestInspectPaidAndPeekBound(t *testing.T) {
	t.Parallel()
	mp := "--b\r\nContent-Disposition: form-data; name=\"allow_paid_broadcast\"\r\n\r\ntrue\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n42\r\n--b--\r\n"
	for _, tc := range []struct {
		name, url, ct, body string
		paid                bool
	}{
		{"query", "http://x/bot1:t/sendMessage?chat_id=42&allow_paid_broadcast=true", "application/json", `{"text":"x"}`, true},
		{"form false", "http://x/bot1:t/sendMessage", "application/x-www-form-urlencoded", "chat_id=42&allow_paid_broadcast=false", false},
		{"form true", "http://x/bot1:t/sendMessage", "application/x-www-form-urlencoded", "chat_id=42&allow_paid_broadcast=true", true},
		{"multipart", "http://x/bot1:t/sendMessage", "multipart/form-data; boundary=b", mp, true},
	} {
		req, _ := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ct)
		chat, found, paid, body, _, err := throttle.Inspect(req)
		if err != nil || chat != 42 || !found || paid != tc.paid {
			t.Errorf("%s: chat %d found %v paid %v err %v; want 42, paid %v", tc.name, chat, found, paid, err, tc.paid)
		}
		body.Close()
	}

	big := `{"chat_id":42,"text":"` + strings.Repeat("x", throttle.MaxPeekBytes-len(`{"chat_id":42,"text":""}`)) + `"}`
	req, _ := http.NewRequest(http.MethodPost, "http://x/bot1:t/sendMessage", io.MultiReader(strings.NewReader(big)))
	req.Header.Set("Content-Type", "application/json")
	req.GetBody = nil
	chat, _, _, body, replayable, err := throttle.Inspect(req)
	got, _ := io.ReadAll(body)
	if err != nil || chat != 42 || !replayable || !bytes.Equal(got, []byte(big)) {
		t.Fatalf("a body of MaxPeekBytes: chat %d replayable %v intact %v err %v; want read whole, replayable", chat, replayable, bytes.Equal(got, []byte(big)), err)
	}
}

// "A 429 from Telegram means Telegram did not act ... it is not counted":
// the retried call counts once, when it is finished.
func TestRetryDoesNotCountTheRefusedSend(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Minute}, MaxWait: 2 * time.Minute})
		p, err := l.Wait(t.Context(), "sendMessage", 3)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := p.Retry(t.Context(), time.Second); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("retry granted after %v, want the 1s pause (the refused send does not fill the chat's window)", d)
		}
		p.Done()
		if d := send(t, l, 3); d != time.Minute {
			t.Fatalf("the next call waited %v, want the chat's minute from the retry's answer", d)
		}
	})
}

// "The limiter counts it from the answer": a send still in flight keeps
// its slot in the bot-wide window however long it takes, so the next send
// goes a window after the answer, not a window after the grant.
func TestInFlightSendHoldsItsSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Bot: throttle.Limit{Count: 1, Per: time.Second}, MaxWait: time.Minute})
		p, err := l.Wait(t.Context(), "sendMessage", 1)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(3 * time.Second) // a slow answer
			p.Done()
		}()
		if d := send(t, l, 2); d != 4*time.Second {
			t.Fatalf("another chat's call went after %v, want 4s (a second after the answer at 3s)", d)
		}
	})
}

// A cancelled call does not count, nor does it delay the next by the
// bot-wide spacing: with 2 per second, two more calls go at once.
func TestCancelUndoesTheSpacing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Bot: throttle.Limit{Count: 2, Per: time.Second}})
		p, err := l.Wait(t.Context(), "sendMessage", 1)
		if err != nil {
			t.Fatal(err)
		}
		p.Cancel()
		if !grantedAtOnce(t, l, "sendMessage", 2, false) || !grantedAtOnce(t, l, "sendMessage", 3, false) {
			t.Fatal("after a cancelled call, two calls at 2/s did not go at once")
		}
	})
}

// A call that gives up (its context ends) lets the call behind it in its
// chat go as soon as that call's own limits allow: here a paid call held
// by a spent Paid budget, with an unpaid call behind it that the Bot
// budget lets through.
func TestGivingUpLetsTheNextCallGo(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, throttle.Config{Paid: throttle.Limit{Count: 1, Per: time.Hour}, MaxWait: 10 * time.Second})
		if !grantedAtOnce(t, l, "sendMessage", 1, true) { // the Paid budget is spent for an hour
			t.Fatal("the first paid call waited")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := l.WaitPaid(ctx, "sendMessage", 5)
			done <- err
		}()
		synctest.Wait()
		got := make(chan time.Duration, 1)
		go func() { got <- send(t, l, 5) }()
		synctest.Wait()
		time.Sleep(time.Second)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("paid call: %v, want cancelled", err)
		}
		if d := <-got; d != time.Second {
			t.Fatalf("the unpaid call behind went after %v, want 1s (when the paid call gave up)", d)
		}
	})
}

// One chat refused twice is that chat's limit, not the bot's, even when
// the second 429 is a late answer to a call MaxHold already counted, while
// the chat's pause from the first runs: the other chats go on.
func TestSameChatRefusedTwicePausesTheChat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var obs observed
		l := newLimiter(t, throttle.Config{MaxHold: 10 * time.Second, MaxWait: time.Minute, Observer: throttle.Observer{EventFunc: obs.observe}})
		p1, err := l.Wait(t.Context(), "sendMessage", 1) // answered late
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			p2, err := l.Wait(t.Context(), "sendMessage", 1) // granted at MaxHold
			if err != nil {
				t.Error(err)
				return
			}
			if s := p2.Limited(5 * time.Second); s != throttle.ScopeChat {
				t.Errorf("first 429 paused %q, want chat", s)
			}
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait() // p2 was refused; chat 1's pause runs to 15s
		retried := make(chan error, 1)
		go func() { retried <- p1.Retry(t.Context(), 3*time.Second) }()
		synctest.Wait()
		if d := send(t, l, 3); d != 0 {
			t.Fatalf("another chat waited %v after chat 1 was refused twice, want 0 (chat 1's limit only)", d)
		}
		if err := <-retried; err != nil {
			t.Fatal(err)
		}
		p1.Done()
		obs.mu.Lock()
		defer obs.mu.Unlock()
		for _, e := range obs.events {
			if e.Kind == throttle.EventTooManyRequests && e.Scope != throttle.ScopeChat {
				t.Errorf("429 event %+v, want scope chat", e)
			}
		}
	})
}
