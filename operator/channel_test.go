package operator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/operator"
)

// botapiError502 is Telegram's own 502, as botapi reports it.
var botapiError502 = botapi.APIError{Method: "sendMessage", Code: 502, Description: "Bad Gateway"}

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}

// Reference §5.5 case 1: topics map to thread ids, order is kept, and sends
// are paced by MinInterval.
func TestTopicsOrderAndPacing(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, clk := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{
			Topics:      map[string]int64{"payments": 12, "errors": 34},
			MinInterval: 1500 * time.Millisecond,
		})
		ch.Post("paid", "payments")
		ch.Post("boom", "errors")
		ch.Post("hello", "")
		drain(t, ch)
		calls := srv.Calls()
		var got []string
		for _, c := range calls {
			got = append(got, fmt.Sprintf("%s@%d", c.Text, c.ThreadID))
			if c.ChatID != -100500 || !c.Preview.Disabled || c.Parse != "" {
				t.Errorf("call %+v: want chat -100500, previews disabled, plain text", c)
			}
		}
		if want := []string{"paid@12", "boom@34", "hello@0"}; !slices.Equal(got, want) {
			t.Errorf("sent %v, want %v", got, want)
		}
		if want := []time.Duration{1500 * time.Millisecond, 1500 * time.Millisecond}; !slices.Equal(clk.gaps(), want) {
			t.Errorf("gaps %v, want %v", clk.gaps(), want)
		}
		if len(d.All()) != 0 {
			t.Errorf("drops %v", d.Summary())
		}
	})
}

// Reference §5.5 case 2: a 429 with retry_after 7 is resent after 7 s.
func TestRetryAfter429(t *testing.T) {
	srv := newBotServer(t, refusal(429, "Too Many Requests: retry after 7", `{"retry_after":7}`))
	synctest.Test(t, func(t *testing.T) {
		client, clk := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{MinInterval: time.Second})
		ch.Post("alert", "")
		drain(t, ch)
		if got := srv.Texts(); !slices.Equal(got, []string{"alert", "alert"}) {
			t.Errorf("sent %v, want the message twice", got)
		}
		if want := []time.Duration{7 * time.Second}; !slices.Equal(clk.gaps(), want) {
			t.Errorf("gaps %v, want %v", clk.gaps(), want)
		}
		if len(d.All()) != 0 {
			t.Errorf("drops %v", d.Summary())
		}
	})
}

// A 429 without retry_after and Telegram's own 5xx are retried after
// MinInterval; a proxy's non-JSON 502 is not retried.
func TestRetryRules(t *testing.T) {
	tests := []struct {
		name   string
		script []answer
		calls  int
		gaps   []time.Duration
		drop   string
		reason string
	}{
		{"429 without retry_after", []answer{refusal(429, "Too Many Requests", "")}, 2, []time.Duration{2 * time.Second}, "", ""},
		{"Telegram 502", []answer{refusal(502, "Bad Gateway", "")}, 2, []time.Duration{2 * time.Second}, "", ""},
		{"retry_after shorter than MinInterval", []answer{refusal(429, "Too Many Requests", `{"retry_after":1}`)}, 2, []time.Duration{2 * time.Second}, "", ""},
		{"proxy 502 page", []answer{{status: 502, body: "<html>Bad Gateway</html>"}}, 1, nil, "m:refused", "unknown"},
		{"attempts exhausted", []answer{refusal(500, "Internal", ""), refusal(502, "Bad Gateway", ""), refusal(503, "Unavailable", "")},
			3, []time.Duration{2 * time.Second, 2 * time.Second}, "m:attempts", "server-error"},
		{"blocked is refused", []answer{refusal(403, "Forbidden: bot was kicked from the supergroup chat", "")}, 1, nil, "m:refused", "blocked-by-user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newBotServer(t, tt.script...)
			synctest.Test(t, func(t *testing.T) {
				client, clk := newClient(t, srv)
				ch, d := newChannel(t, client, operator.Config{MinInterval: 2 * time.Second})
				ch.Post("m", "")
				drain(t, ch)
				if n := len(srv.Calls()); n != tt.calls {
					t.Errorf("%d calls, want %d", n, tt.calls)
				}
				if !slices.Equal(clk.gaps(), tt.gaps) {
					t.Errorf("gaps %v, want %v", clk.gaps(), tt.gaps)
				}
				all := d.All()
				if tt.drop == "" {
					if len(all) != 0 {
						t.Errorf("drops %v, want none", d.Summary())
					}
					return
				}
				if len(all) != 1 || d.Summary()[0] != tt.drop || all[0].Failure == nil || string(all[0].Failure.Reason) != tt.reason {
					t.Errorf("drops %+v, want %s with failure %s", all, tt.drop, tt.reason)
				}
			})
		})
	}
}

// Reference §5.5 case 3: the queue keeps MaxQueued besides the one in
// flight and drops the oldest; a refused message is dropped with its failure.
func TestOverflowAndRefused(t *testing.T) {
	hold := make(chan struct{})
	a := refusal(400, "Bad Request: can't parse entities: unexpected end tag", "")
	a.hold = hold
	srv := newBotServer(t, a)
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{MaxQueued: 2, MinInterval: time.Second})
		ch.Post("a", "")
		srv.awaitCall(t, 0)
		ch.Post("b", "")
		ch.Post("c", "")
		ch.Post("d", "")
		if p := ch.Pending(); p != 3 {
			t.Errorf("Pending = %d, want 3 (two queued, one in flight)", p)
		}
		close(hold)
		drain(t, ch)
		if got, want := d.Summary(), []string{"b:overflow", "a:refused"}; !slices.Equal(got, want) {
			t.Errorf("drops %v, want %v", got, want)
		}
		if f := d.All()[1].Failure; f == nil || f.Reason != "message-invalid" {
			t.Errorf("failure %+v, want message-invalid", f)
		}
		if got := srv.Texts(); !slices.Equal(got, []string{"a", "c", "d"}) {
			t.Errorf("sent %v", got)
		}
		if p := ch.Pending(); p != 0 {
			t.Errorf("Pending after drain = %d", p)
		}
	})
}

// Reference §5.5 case 4: Post never panics, even when OnDrop panics and the
// sender panics or keeps failing.
func TestPostNeverPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		ch, err := operator.New(operator.Config{
			ChatID:      1,
			MaxAttempts: 2,
			MinInterval: time.Second,
			SendFunc: func(ctx context.Context, m operator.Message) error {
				calls++
				if m.Text == "panic" {
					panic("sender exploded")
				}
				return &botapiError502
			},
			OnDrop: func(operator.Drop) { panic("observer exploded") },
			Dedupe: &operator.DedupeConfig{FingerprintFunc: func(text, topic string) string {
				if text == "bad fingerprint" {
					panic("fingerprint exploded")
				}
				return text
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		ch.Post("panic", "")
		ch.Post("502", "")
		ch.Post("bad fingerprint", "")
		drain(t, ch)
		if p := ch.Pending(); p != 0 {
			t.Errorf("Pending = %d", p)
		}
		// panic: one attempt (unknown, refused); 502: two attempts;
		// bad fingerprint: admitted unchanged, two attempts.
		if calls != 5 {
			t.Errorf("%d sends, want 5", calls)
		}
		ch.Close()
		ch.Post("after close", "")
	})
}

// Reference §5.5 case 5: Close abandons the in-flight send and drops the
// queue; a later Post is dropped too. Order: queued, in flight, late.
func TestCloseDropsEverything(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	srv := newBotServer(t, answer{status: 200, body: `{"ok":true,"result":{}}`, hold: hold})
	client, _ := newClient(t, srv)
	ch, d := newChannel(t, client, operator.Config{MinInterval: time.Millisecond})
	ch.Post("in flight", "")
	srv.awaitCall(t, 0)
	ch.Post("queued", "")
	ch.Close()
	ch.Post("late", "")
	want := []string{"queued:closed", "in flight:closed", "late:closed"}
	if got := d.Summary(); !slices.Equal(got, want) {
		t.Errorf("drops %v, want %v", got, want)
	}
	// Beyond the reference: the send cut off in flight had reached the
	// server, so its drop says its outcome is unknown (repeating it could
	// post it twice); the others never left.
	for _, x := range d.All() {
		inFlight := x.Text == "in flight"
		if got := x.Failure != nil && x.Failure.Reason == botapi.ReasonUnknown; got != inFlight {
			t.Errorf("drop %q: Failure %+v, want unknown only for the send in flight", x.Text, x.Failure)
		}
	}
	ch.Close() // idempotent
	if err := ch.Drain(t.Context()); err != nil {
		t.Errorf("Drain after Close: %v", err)
	}
}

// Beyond the reference: the pace is remembered across idle periods.
func TestPacingRememberedAcrossIdle(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, clk := newClient(t, srv)
		ch, _ := newChannel(t, client, operator.Config{MinInterval: 3 * time.Second})
		ch.Post("first", "")
		drain(t, ch)
		time.Sleep(time.Second) // idle: the worker has ended
		ch.Post("second", "")
		drain(t, ch)
		time.Sleep(10 * time.Second) // long idle: no wait needed
		ch.Post("third", "")
		drain(t, ch)
		want := []time.Duration{3 * time.Second, 10 * time.Second}
		if !slices.Equal(clk.gaps(), want) {
			t.Errorf("gaps %v, want %v", clk.gaps(), want)
		}
	})
}

// Beyond the reference: a group migrated to a supergroup is re-targeted.
func TestChatMigrated(t *testing.T) {
	srv := newBotServer(t, refusal(400, "Bad Request: group chat was upgraded to a supergroup chat", `{"migrate_to_chat_id":-1009876543210}`))
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{ChatID: -4242, MinInterval: time.Second})
		ch.Post("one", "")
		ch.Post("two", "")
		drain(t, ch)
		var got []string
		for _, c := range srv.Calls() {
			got = append(got, fmt.Sprintf("%s@%d", c.Text, c.ChatID))
		}
		want := []string{"one@-4242", "one@-1009876543210", "two@-1009876543210"}
		if !slices.Equal(got, want) {
			t.Errorf("sent %v, want %v", got, want)
		}
		if len(d.All()) != 0 {
			t.Errorf("drops %v", d.Summary())
		}
	})
}

// A send that hangs is bounded by SendTimeout and dropped as refused (its
// outcome is unknown, so it is not repeated).
func TestSendTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		d := &drops{}
		ch, err := operator.New(operator.Config{
			ChatID:      1,
			SendTimeout: 5 * time.Second,
			SendFunc: func(ctx context.Context, m operator.Message) error {
				calls++
				<-ctx.Done()
				return ctx.Err()
			},
			OnDrop: d.add,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		start := time.Now()
		ch.Post("stuck", "")
		drain(t, ch)
		if el := time.Since(start); el != 5*time.Second {
			t.Errorf("dropped after %v, want the 5s SendTimeout", el)
		}
		if calls != 1 || !slices.Equal(d.Summary(), []string{"stuck:refused"}) {
			t.Errorf("calls %d, drops %v", calls, d.Summary())
		}
	})
}

// Drain is bounded by its context.
func TestDrainBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ch, err := operator.New(operator.Config{ChatID: 1, SendFunc: func(ctx context.Context, m operator.Message) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		ch.Post("slow", "")
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := ch.Drain(ctx); err != context.DeadlineExceeded {
			t.Errorf("Drain = %v, want DeadlineExceeded", err)
		}
		close(release)
		drain(t, ch)
	})
}
