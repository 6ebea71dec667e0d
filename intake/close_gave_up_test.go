package intake_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// closeLog signals once the runner logs that Close left an attempt
// unsettled.
type closeLog struct {
	left chan struct{}
	once sync.Once
}

func (h *closeLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *closeLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *closeLog) WithGroup(string) slog.Handler            { return h }
func (h *closeLog) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == "intake: attempt cancelled by Close; left unsettled, to run again" {
		h.once.Do(func() { close(h.left) })
	}
	return nil
}

// TestCloseGaveUpLeavesAttemptsUnsettledQuietly: a handler that Close
// gave up on (and cancelled) and that then returns, with a failure that
// would be retried or with success, leaves its row processing, to be taken
// over after its lease, as Close documents. No settlement is tried on the
// run Close ended, so the observers see no store error and no lost lease,
// which there was not; a failure is reported as retrying.
func TestCloseGaveUpLeavesAttemptsUnsettledQuietly(t *testing.T) {
	for _, tc := range []struct {
		name string
		herr error
	}{
		{"failure", errors.New("the app is still refusing")},
		{"success", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "intake.db"), sqlitestore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			var (
				mu       sync.Mutex
				spurious []string
				failures []intake.Failure
				running  = make(chan struct{})
				logs     = &closeLog{left: make(chan struct{})}
				note     = func(what string) { mu.Lock(); spurious = append(spurious, what); mu.Unlock() }
			)
			r, err := intake.New(intake.Config{
				Store:       store,
				MaxAttempts: 5,
				Logger:      slog.New(logs),
				Handler: func(ctx context.Context, u intake.Update) error {
					close(running)
					<-ctx.Done()
					return tc.herr // not the context's error
				},
				Observer: intake.Observer{
					StoreErrorFunc: func(step intake.Step, id int64, err error) {
						note("store error at " + string(step) + ": " + err.Error())
					},
					LeaseLostFunc: func(intake.Identity) { note("lease lost") },
					SettleFunc:    func(intake.Identity, intake.State) { note("settled") },
					FailureFunc:   func(f intake.Failure) { mu.Lock(); failures = append(failures, f); mu.Unlock() },
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			closeGivingUp(t, r, running)
			select {
			case <-logs.left:
			case <-time.After(time.Minute):
				t.Fatal("the cancelled attempt was never logged as left unsettled")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(spurious) > 0 {
				t.Errorf("after Close gave up: %q; want no store error, lost lease or settlement", spurious)
			}
			if wantFailures := tc.herr != nil; (len(failures) == 1) != wantFailures || wantFailures && !failures[0].Retrying {
				t.Errorf("failures reported: %+v; want one retrying failure: %v", failures, wantFailures)
			}
			if got := row(t, store, 1); got.State != intake.StateProcessing {
				t.Errorf("row is %q, want processing: left for a takeover", got.State)
			}
		})
	}
}
