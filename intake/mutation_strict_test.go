package intake_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// Under strict chat order (adds unclaimed) a re-delivered update is a
// Duplicate, and is not handled again.
func TestStrictOrderDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		r := newRunner(t, intake.Config{
			Store:     memstore.New(),
			ChatOrder: intake.ChatOrderStrict,
			Handler:   func(context.Context, intake.Update) error { calls.Add(1); return nil },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		mustAccept(t, r, msg(1, 1), intake.Duplicate)
		idle(t, r)
		if n := calls.Load(); n != 1 {
			t.Fatalf("handled %d times, want once", n)
		}
	})
}
