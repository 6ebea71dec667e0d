package intake_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// A store that stops answering without failing (a stalled database
// connection) holds an accept for AcceptTimeout, not for the lease: the
// webhook can answer 503 while Telegram still waits.
func TestAcceptBoundedWhenTheStoreStalls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration // Config.AcceptTimeout; 0: the default
		want    time.Duration
	}{
		{"default", 0, intake.DefaultAcceptTimeout},
		{"configured", 3 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name+"/batch", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newFaultStore()
				store.AddBatchFunc = func(ctx context.Context, _ []intake.AddRequest) ([]intake.AddResult, error) {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				r := newRunner(t, intake.Config{Store: store, Handler: nop, LeaseDuration: time.Hour, AcceptTimeout: tc.timeout})
				checkStalledAccept(t, r, tc.want)
			})
		})
		t.Run(tc.name+"/claimed", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newClaimingStore()
				store.AddFunc = func(ctx context.Context, _ []intake.AddRequest) ([]intake.AddResult, error) {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				r := newRunner(t, intake.Config{Store: store, Handler: nop, LeaseDuration: time.Hour, AcceptTimeout: tc.timeout})
				if err := r.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				checkStalledAccept(t, r, tc.want)
			})
		})
	}
}

func checkStalledAccept(t *testing.T, r *intake.Runner, want time.Duration) {
	t.Helper()
	start := time.Now()
	_, err := r.Accept(t.Context(), msg(1, 1))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Accept on a stalled store: %v, want a deadline error", err)
	}
	if took != want {
		t.Fatalf("Accept on a stalled store returned after %v, want %v (the accept bound, not the lease)", took, want)
	}
}

// An accept queued behind a commit that never ends (a store call that
// ignores its context, as a driver stuck in a write can) still returns
// AcceptTimeout after it was made, with a deadline error, and its update
// is never recorded: the group commit bounds its wait in the queue.
func TestAcceptQueuedBehindAStuckCommitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		store := newFaultStore()
		store.AddBatchFunc = func(context.Context, []intake.AddRequest) ([]intake.AddResult, error) {
			<-release // deaf to its context
			return nil, errors.New("released")
		}
		r := newRunner(t, intake.Config{Store: store, Handler: nop, LeaseDuration: time.Hour, AcceptTimeout: 3 * time.Second})
		leaderDone := make(chan struct{})
		go func() {
			defer close(leaderDone)
			_, _ = r.Accept(t.Context(), msg(1, 1))
		}()
		synctest.Wait() // the first accept leads, stuck in the store
		time.Sleep(time.Second)
		start := time.Now()
		_, err := r.Accept(t.Context(), msg(2, 2))
		if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took != 3*time.Second {
			t.Fatalf("queued Accept = %v after %v, want a deadline error after 3s", err, took)
		}
		if n := store.Calls("AddBatch"); n != 1 {
			t.Fatalf("AddBatch called %d times, want only the stuck leader's", n)
		}
		close(release)
		<-leaderDone
	})
}

func TestAcceptTimeoutValidated(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, intake.MaxAcceptTimeout + time.Second} {
		if _, err := intake.New(intake.Config{Store: newFaultStore(), Handler: nop, AcceptTimeout: d}); err == nil {
			t.Errorf("AcceptTimeout %v accepted", d)
		}
	}
}
