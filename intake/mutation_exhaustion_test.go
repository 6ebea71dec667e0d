package intake_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// An exhaustion an attempt recorded takes over the attempt's place in
// MaxQueued: it is delivered at once even when MaxQueued is reached, not
// left for a sweep.
func TestExhaustionFromAnAttemptIsDeliveredWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var delivered atomic.Int32
		r := newRunner(t, intake.Config{
			Store:             memstore.New(),
			MaxQueued:         1,
			Handler:           func(context.Context, intake.Update) error { return intake.Abandon(errBoom) },
			ExhaustionHandler: func(context.Context, intake.Exhaustion) error { delivered.Add(1); return nil },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		if n := delivered.Load(); n != 1 {
			t.Fatalf("%d deliveries, want the exhaustion delivered at once", n)
		}
	})
}
