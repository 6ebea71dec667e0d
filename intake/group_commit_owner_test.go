package intake_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// lapsingStore is a memstore that refuses every heartbeat renewal and
// every registration after the first, so that the runner's process lapses
// at its first beat and stays without one, and whose adds of update hold
// wait until hold is closed.
type lapsingStore struct {
	*memstore.Store
	hold       chan struct{}
	holdID     int64
	mu         sync.Mutex
	registered int
}

func (s *lapsingStore) Register(ctx context.Context, process string, until time.Time) (bool, error) {
	s.mu.Lock()
	s.registered++
	n := s.registered
	s.mu.Unlock()
	if n > 1 {
		return false, errors.New("registration refused")
	}
	return s.Store.Register(ctx, process, until)
}

func (s *lapsingStore) Beat(context.Context, string, time.Time, time.Time) (bool, error) {
	return false, nil // refused: the process lapses at once
}

func (s *lapsingStore) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	if slices.ContainsFunc(reqs, func(rq intake.AddRequest) bool { return rq.UpdateID == s.holdID }) {
		<-s.hold
	}
	return s.Store.AddBatchAs(ctx, reqs, p)
}

// TestGroupCommitClaimsOnlyAsItsOwnProcess checks a group commit whose
// claimed adds were reserved under different heartbeats: update 1's under
// the runner's registered process, update 2's after that process lapsed
// (an ownerless claim). The commit claims as update 1's process, so update
// 2 is recorded unclaimed and then claimed ownerless under its own lease:
// it is never recorded as the lapsed process's, whose rows other
// processes may take over at once while its handler runs here.
func TestGroupCommitClaimsOnlyAsItsOwnProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &lapsingStore{Store: memstore.New(), hold: make(chan struct{}), holdID: 10}
		release := make(chan struct{})
		r := newRunner(t, intake.Config{
			Store:            store,
			LeaseDuration:    time.Hour,
			AcceptTimeout:    time.Hour,
			HeartbeatTimeout: time.Second,
			MaxConcurrent:    4,
			Handler: func(ctx context.Context, u intake.Update) error {
				<-release
				return nil
			},
		})
		start(t, r) // registers its process, live for a second
		t.Cleanup(func() { close(release) })
		done := make(chan struct{}, 3)
		accept := func(body []byte) {
			defer func() { done <- struct{}{} }()
			if a, err := r.Accept(context.Background(), body); err != nil || a != intake.Accepted {
				t.Errorf("Accept = %v, %v, want accepted", a, err)
			}
		}
		go accept(msg(10, 10))
		synctest.Wait() // update 10's claimed add is committing, held in the store
		go accept(msg(1, 1))
		synctest.Wait() // update 1 reserved under the live process, waits for the next commit
		time.Sleep(500 * time.Millisecond)
		synctest.Wait() // the first beat was refused: the process lapsed
		go accept(msg(2, 2))
		synctest.Wait() // update 2 reserved ownerless, in update 1's commit
		close(store.hold)
		for range 3 {
			<-done
		}
		synctest.Wait()

		// Past the lapsed process's end (one second after it registered),
		// the store hands its rows to whoever claims them.
		time.Sleep(time.Second)
		now := time.Now()
		due, err := store.Due(t.Context(), intake.DueQuery{Now: now, PendingBefore: now, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if got := row(t, store, 2); got.State != intake.StateProcessing {
			t.Fatalf("update 2 is %q, want processing (its handler runs)", got.State)
		}
		for _, u := range due {
			if u.UpdateID == 2 {
				t.Fatalf("update 2, whose handler runs here under its own lease, is due to other processes: " +
					"its claimed add was recorded as the lapsed process's")
			}
		}
	})
}
