package intake_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// lapseLog records the "attempts" attribute of the runner's heartbeat
// lapse warnings.
type lapseLog struct {
	mu       sync.Mutex
	attempts []int64
}

func (h *lapseLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *lapseLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *lapseLog) WithGroup(string) slog.Handler            { return h }
func (h *lapseLog) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "intake: process heartbeat lapsed; stopping its attempts" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "attempts" {
			h.mu.Lock()
			h.attempts = append(h.attempts, a.Value.Int64())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// The heartbeat forgets an attempt once it ended: a lapse later finds only
// the attempts in flight (none here), not every attempt the process ever
// ran, which a long-lived process would otherwise accumulate.
func TestHeartbeatForgetsEndedAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &pausable{Store: memstore.New()}
		logs := &lapseLog{}
		r := newRunner(t, intake.Config{
			Store:   fs,
			Logger:  slog.New(logs),
			Handler: func(context.Context, intake.Update) error { return nil },
		})
		start(t, r)
		for id := int64(1); id <= 3; id++ {
			mustAccept(t, r, msg(id, id), intake.Accepted)
		}
		idle(t, r)
		fs.paused.Store(true) // no heartbeat gets through from now on
		time.Sleep(intake.DefaultHeartbeatTimeout + intake.DefaultHeartbeatInterval)
		synctest.Wait()
		logs.mu.Lock()
		defer logs.mu.Unlock()
		if len(logs.attempts) != 1 || logs.attempts[0] != 0 {
			t.Fatalf("lapses stopping %v attempts, want one lapse stopping none", logs.attempts)
		}
	})
}

// refusing is a memstore whose heartbeat renewals are refused, as a store
// refuses the renewal of a process it already reaped.
type refusing struct{ *memstore.Store }

func (refusing) Beat(context.Context, string, time.Time, time.Time) (bool, error) { return false, nil }

// A refused heartbeat renewal stops the process's attempts at once, not
// when the heartbeat it last proved would have ended.
func TestRefusedHeartbeatStopsAttemptsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stoppedAfter time.Duration
		var cause error
		r := newRunner(t, intake.Config{
			Store: refusing{memstore.New()},
			Handler: func(ctx context.Context, u intake.Update) error {
				t0 := time.Now()
				<-ctx.Done()
				stoppedAfter, cause = time.Since(t0), context.Cause(ctx)
				return ctx.Err()
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		if stoppedAfter != intake.DefaultHeartbeatInterval || !errors.Is(cause, intake.ErrHeartbeatLapsed) {
			t.Fatalf("handler stopped after %v with %v, want at the first renewal (%v) with ErrHeartbeatLapsed",
				stoppedAfter, cause, intake.DefaultHeartbeatInterval)
		}
	})
}

// leaves is a pausable store that records the process ids it is asked to
// remove.
type leaves struct {
	*pausable
	mu   sync.Mutex
	left []string
}

func (s *leaves) Leave(ctx context.Context, id string) (bool, error) {
	s.mu.Lock()
	s.left = append(s.left, id)
	s.mu.Unlock()
	return s.pausable.Leave(ctx, id)
}

func (s *leaves) Left() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.left...)
}

// After a lapse the process removes the id it gave up, once, as soon as
// the store answers again (a late renewal may have kept it alive).
func TestLapsedIDRemovedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &leaves{pausable: &pausable{Store: memstore.New()}}
		r := newRunner(t, intake.Config{Store: store, Handler: func(context.Context, intake.Update) error { return nil }})
		start(t, r)
		store.paused.Store(true)
		time.Sleep(intake.DefaultHeartbeatTimeout + intake.DefaultHeartbeatInterval) // it lapses
		store.paused.Store(false)
		time.Sleep(5 * intake.DefaultHeartbeatInterval)
		synctest.Wait()
		if got := store.Left(); len(got) != 1 {
			t.Fatalf("removed %q, want the lapsed id removed once", got)
		}
	})
}

// A Close that gives up on a handler in flight leaves the heartbeat to
// lapse rather than removing it: the update is not taken over while its
// handler still runs here.
func TestCloseGivingUpDoesNotLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &leaves{pausable: &pausable{Store: memstore.New()}}
		release := make(chan struct{})
		r := newRunner(t, intake.Config{Store: store, Handler: func(context.Context, intake.Update) error {
			<-release // ignores its context
			return nil
		}})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := r.Close(ctx); err == nil {
			t.Fatal("Close returned nil with a handler still running")
		}
		left := store.Left()
		close(release)
		if len(left) != 0 {
			t.Fatalf("Close that gave up removed %q, want the heartbeat left to lapse", left)
		}
	})
}
