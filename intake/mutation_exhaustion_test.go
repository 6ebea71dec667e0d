package intake_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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

// An exhaustion being delivered is not delivered again by a sweep that
// lists it meanwhile (it is unacknowledged until the delivery returns).
func TestSweepDoesNotRedeliverAnExhaustionInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var delivered atomic.Int32
		r := newRunner(t, intake.Config{
			Store:   memstore.New(),
			Handler: func(context.Context, intake.Update) error { return intake.Abandon(errBoom) },
			ExhaustionHandler: func(context.Context, intake.Exhaustion) error {
				delivered.Add(1)
				<-release
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		synctest.Wait() // the exhaustion's delivery waits
		n := sweep(t, r)
		synctest.Wait()
		close(release)
		idle(t, r)
		if n != 0 || delivered.Load() != 1 {
			t.Fatalf("sweep scheduled %d, %d deliveries; want 0 and one delivery", n, delivered.Load())
		}
	})
}

// An acknowledgement the store refuses (another process acknowledged the
// exhaustion, or it was requeued) is not reported to AcknowledgeFunc.
func TestRefusedAcknowledgementIsNotReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		store.AckFunc = func(context.Context, intake.Identity, time.Time) (bool, error) { return false, nil }
		var acked atomic.Int32
		r := newRunner(t, intake.Config{
			Store:             store,
			Handler:           func(context.Context, intake.Update) error { return intake.Abandon(errBoom) },
			ExhaustionHandler: func(context.Context, intake.Exhaustion) error { return nil },
			Observer:          intake.Observer{AcknowledgeFunc: func(intake.Identity) { acked.Add(1) }},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		if n := acked.Load(); n != 0 || store.Calls("AcknowledgeExhaustion") != 1 {
			t.Fatalf("AcknowledgeFunc called %d times after %d refused acknowledgements, want none after 1",
				n, store.Calls("AcknowledgeExhaustion"))
		}
	})
}
