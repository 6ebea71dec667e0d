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

func TestAcceptTimeoutValidated(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, intake.MaxAcceptTimeout + time.Second} {
		if _, err := intake.New(intake.Config{Store: newFaultStore(), Handler: nop, AcceptTimeout: d}); err == nil {
			t.Errorf("AcceptTimeout %v accepted", d)
		}
	}
}
