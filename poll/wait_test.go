package poll_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/poll"
)

type instantCaller struct {
	n   atomic.Int64
	res string
}

func (c *instantCaller) Call(context.Context, string, any) (json.RawMessage, error) {
	c.n.Add(1)
	return json.RawMessage(c.res), nil
}

// A getUpdates that answers at once with nothing that moves the offset
// (an empty batch, null, only elements that are not updates) must be
// backed off like a failure, not called again in a tight loop.
func TestEarlyEmptyAnswersBackOff(t *testing.T) {
	for _, res := range []string{`[]`, `null`, `[{"foo":1}]`} {
		c := &instantCaller{res: res}
		p, err := poll.New(poll.Config{Caller: c, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			AcceptFunc: func(_ context.Context, b []byte) (intake.Acceptance, error) {
				if _, err := intake.ParseUpdate(b); err != nil {
					return intake.Invalid, nil
				}
				return intake.Accepted, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		p.Run(ctx)
		cancel()
		if n := c.n.Load(); n > 60 {
			t.Errorf("%s: %d getUpdates calls in 300ms with a 10-20ms backoff; want a paced loop", res, n)
		}
	}
}

type errCaller struct{ err error }

func (c errCaller) Call(context.Context, string, any) (json.RawMessage, error) { return nil, c.err }

// Telegram's 429 names its wait: the poller waits that long rather than
// its own shorter backoff (at most MaxBackoffLimit), and a proxy's 429
// page, which is not Telegram's word, gets the backoff.
func TestTelegrams429WaitIsKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"retry_after 7s", &botapi.APIError{Method: "getUpdates", Code: 429, RetryAfter: 7 * time.Second}, 7 * time.Second},
		{"retry_after an hour", &botapi.APIError{Method: "getUpdates", Code: 429, RetryAfter: time.Hour}, poll.MaxBackoffLimit},
		{"a proxy's 429 page", &botapi.APIError{Method: "getUpdates", Code: 429, NotJSON: true}, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var waits []time.Duration
			p, err := poll.New(poll.Config{Caller: errCaller{tc.err}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
				AcceptFunc: func(context.Context, []byte) (intake.Acceptance, error) { return intake.Accepted, nil },
				Observer: poll.Observer{ErrorFunc: func(_ error, wait time.Duration) {
					waits = append(waits, wait)
					cancel() // one failure is enough
				}}})
			if err != nil {
				t.Fatal(err)
			}
			p.Run(ctx)
			if len(waits) != 1 || waits[0] != tc.want {
				t.Fatalf("waits %v, want [%v]", waits, tc.want)
			}
		})
	}
}
