package intake_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// TestClaimUnderALapsedHeartbeatNeverRuns checks an update claimed (on
// add) under the runner's process whose heartbeat lapses before the
// claim's handler starts: other processes may take the update over from
// the lapsed process, so that attempt is stopped before its handler runs
// and reported lost; the update is handled by a later attempt instead.
func TestClaimUnderALapsedHeartbeatNeverRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &lapsingStore{Store: memstore.New(), hold: make(chan struct{}), holdID: 1}
		var handled, lost recorder
		r := newRunner(t, intake.Config{
			Store:            store,
			LeaseDuration:    time.Hour,
			AcceptTimeout:    time.Hour,
			HeartbeatTimeout: time.Second,
			AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
				handled.add("attempt %d", a.Attempt)
				return nil
			},
			Observer: intake.Observer{LeaseLostFunc: func(id intake.Identity) { lost.add("attempt %d", id.Attempt) }},
		})
		start(t, r)
		accepted := make(chan struct{})
		go func() {
			defer close(accepted)
			mustAccept(t, r, msg(1, 1), intake.Accepted)
		}()
		synctest.Wait() // update 1 reserved under the live process; its claimed add is held
		time.Sleep(500 * time.Millisecond)
		synctest.Wait() // the first beat was refused: the process lapsed
		close(store.hold)
		<-accepted
		synctest.Wait()
		if got := lost.get(); !slices.Equal(got, []string{"attempt 1"}) {
			t.Errorf("LeaseLostFunc saw %q, want [attempt 1]: the claim taken under the lapsed process", got)
		}
		if got := handled.get(); slices.Contains(got, "attempt 1") {
			t.Errorf("handled %q: the claim taken under the lapsed process ran its handler", got)
		}
	})
}
