package poll_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

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
