package operator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/operator"
)

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
