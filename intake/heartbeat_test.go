package intake_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// mortal is one process's view of a shared store: once killed, every call
// of the process fails, as if it had vanished mid-flight; the store itself,
// and the other processes' views, live on.
type mortal struct {
	*memstore.Store
	dead atomic.Bool

	mu         sync.Mutex
	registered []string
	left       []string
}

var errKilled = errors.New("process killed")

func (m *mortal) kill() { m.dead.Store(true) }

func (m *mortal) check() error {
	if m.dead.Load() {
		return errKilled
	}
	return nil
}

func (m *mortal) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	if err := m.check(); err != nil {
		return intake.Identity{}, false, err
	}
	return m.Store.Claim(ctx, id, o)
}

func (m *mortal) Renew(ctx context.Context, id intake.Identity, until, now time.Time) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	return m.Store.Renew(ctx, id, until, now)
}

func (m *mortal) Settle(ctx context.Context, id intake.Identity, s intake.Settlement) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	return m.Store.Settle(ctx, id, s)
}

func (m *mortal) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.Store.Due(ctx, q)
}

func (m *mortal) Register(ctx context.Context, p string, until time.Time) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	m.mu.Lock()
	m.registered = append(m.registered, p)
	m.mu.Unlock()
	return m.Store.Register(ctx, p, until)
}

func (m *mortal) Beat(ctx context.Context, p string, until, now time.Time) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	return m.Store.Beat(ctx, p, until, now)
}

func (m *mortal) Reap(ctx context.Context, now time.Time) (int, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	return m.Store.Reap(ctx, now)
}

func (m *mortal) Leave(ctx context.Context, p string) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	m.mu.Lock()
	m.left = append(m.left, p)
	m.mu.Unlock()
	return m.Store.Leave(ctx, p)
}

// blockUntilLost is a handler that holds its update until its attempt is
// stopped, and reports the cause.
func blockUntilLost(causes chan<- error) func(ctx context.Context, u intake.Update) error {
	return func(ctx context.Context, u intake.Update) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}
}

// TestDeadProcessTakenOverWithinHeartbeat: a process is killed while it
// handles an update under a 120 s lease. Another process takes the update
// over once the dead one's heartbeat lapses — within the heartbeat timeout
// and one renewal period, not the lease — and the dead process's attempt
// was stopped with ErrHeartbeatLapsed. With defaults only.
func TestDeadProcessTakenOverWithinHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		victim := &mortal{Store: store}
		causes := make(chan error, 1)
		a := newRunner(t, intake.Config{Store: victim, Handler: blockUntilLost(causes)})
		start(t, a)
		mustAccept(t, a, msg(1, 1), intake.Accepted)
		synctest.Wait()

		handled := make(chan time.Time, 1)
		b := newRunner(t, intake.Config{Store: store, Handler: func(ctx context.Context, u intake.Update) error {
			handled <- time.Now()
			return nil
		}})
		start(t, b)
		killed := time.Now()
		victim.kill()

		took := (<-handled).Sub(killed)
		if limit := intake.DefaultHeartbeatTimeout + intake.DefaultHeartbeatInterval; took > limit {
			t.Errorf("update taken over %v after the kill; want within %v (heartbeat timeout + one renewal)", took, limit)
		}
		if floor := intake.DefaultHeartbeatTimeout - intake.DefaultHeartbeatInterval; took < floor {
			t.Errorf("update taken over %v after the kill, before the victim's heartbeat could have lapsed (%v)", took, floor)
		}
		var lost *intake.OwnershipLostError
		if cause := <-causes; !errors.As(cause, &lost) || !errors.Is(cause, intake.ErrHeartbeatLapsed) {
			t.Errorf("the victim's attempt ended with cause %v; want an *OwnershipLostError wrapping ErrHeartbeatLapsed", cause)
		}
		idle(t, b)
		if got := row(t, store, 1); got.State != intake.StateCompleted || got.Attempts != 2 {
			t.Errorf("row is %s after %d attempts; want completed after 2", got.State, got.Attempts)
		}
	})
}

// TestCrashesDoNotSpendAttempts: with MaxAttempts 1, an update whose
// process was killed is still handled by the next one; without a crash
// budget (MaxCrashes -1) the kill used its only attempt.
func TestCrashesDoNotSpendAttempts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxCrashes int
		want       intake.State
		wantError  string
	}{
		{"crash budget", 0, intake.StateCompleted, ""},
		{"no crash budget", -1, intake.StateAbandoned, intake.AttemptsSpentText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New()
				victim := &mortal{Store: store}
				causes := make(chan error, 1)
				a := newRunner(t, intake.Config{Store: victim, MaxAttempts: 1, Handler: blockUntilLost(causes)})
				start(t, a)
				mustAccept(t, a, msg(1, 1), intake.Accepted)
				synctest.Wait()
				victim.kill()

				var calls atomic.Int32
				b := newRunner(t, intake.Config{Store: store, MaxAttempts: 1, MaxCrashes: tc.maxCrashes,
					Handler: func(ctx context.Context, u intake.Update) error { calls.Add(1); return nil }})
				start(t, b)
				time.Sleep(intake.DefaultHeartbeatTimeout + intake.DefaultHeartbeatInterval)
				idle(t, b)
				got := row(t, store, 1)
				if got.State != tc.want || got.Error != tc.wantError {
					t.Errorf("row is %s with error %q after %d calls; want %s with %q", got.State, got.Error, calls.Load(), tc.want, tc.wantError)
				}
				<-causes
			})
		})
	}
}

// TestPoisonUpdateCrashLoopEnds: an update that kills every process that
// handles it is given up after MaxCrashes crashes, with CrashesSpentText,
// although MaxAttempts was never reached.
func TestPoisonUpdateCrashLoopEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		const maxCrashes = 3
		var calls atomic.Int32
		causes := make(chan error, maxCrashes+1)
		// Each process dies the moment it handles the poison update.
		newProcess := func() *intake.Runner {
			p := &mortal{Store: store}
			return newRunner(t, intake.Config{Store: p, MaxAttempts: 5, MaxCrashes: maxCrashes,
				Handler: func(ctx context.Context, u intake.Update) error {
					calls.Add(1)
					p.kill()
					return blockUntilLost(causes)(ctx, u)
				}})
		}
		first := newProcess()
		start(t, first)
		mustAccept(t, first, msg(1, 1), intake.Accepted)
		for range maxCrashes {
			start(t, newProcess()) // a restart after the last one died
			time.Sleep(intake.DefaultHeartbeatTimeout + intake.DefaultHeartbeatInterval)
			synctest.Wait()
		}
		got := row(t, store, 1)
		if got.State != intake.StateAbandoned || got.Error != intake.CrashesSpentText {
			t.Errorf("row is %s with error %q; want abandoned with %q", got.State, got.Error, intake.CrashesSpentText)
		}
		if n := calls.Load(); n != maxCrashes {
			t.Errorf("the poison update was handled %d times; want %d (one per crash the budget allows)", n, maxCrashes)
		}
	})
}

// TestPausedProcessFindsItsClaimGone: a process whose heartbeat cannot be
// renewed for longer than the timeout (a pause, a partition) stops its
// attempt itself; another process takes the update over, and when the
// paused attempt comes back to settle, the store refuses it.
func TestPausedProcessFindsItsClaimGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		fs := &pausable{Store: store}
		causes := make(chan error, 1)
		taken := make(chan struct{})
		var settled, lost atomic.Bool
		a := newRunner(t, intake.Config{Store: fs, Handler: func(ctx context.Context, u intake.Update) error {
			fs.paused.Store(true) // from now on its heartbeats do not get through
			<-ctx.Done()
			causes <- context.Cause(ctx)
			<-taken // it resumes only after the takeover
			return errors.New("too late")
		}, Observer: intake.Observer{
			SettleFunc:    func(intake.Identity, intake.State) { settled.Store(true) },
			LeaseLostFunc: func(intake.Identity) { lost.Store(true) },
		}})
		start(t, a)
		mustAccept(t, a, msg(1, 1), intake.Accepted)
		if cause := <-causes; !errors.Is(cause, intake.ErrHeartbeatLapsed) {
			t.Fatalf("the paused attempt ended with cause %v; want ErrHeartbeatLapsed", cause)
		}
		b := newRunner(t, intake.Config{Store: store, Handler: func(ctx context.Context, u intake.Update) error {
			close(taken)
			return nil
		}})
		start(t, b)
		// a's attempt ends only after b's handler ran (taken), so once a is
		// idle b has its attempt scheduled, and b's Idle waits for its
		// completion to commit. (b's start-up sweep may not find the row:
		// b takes it over when its own heartbeat next reaps a.)
		idle(t, a)
		idle(t, b)
		if got := row(t, store, 1); got.State != intake.StateCompleted || got.Attempts != 2 {
			t.Errorf("row is %s after %d attempts; want completed by the second", got.State, got.Attempts)
		}
		if settled.Load() || !lost.Load() {
			t.Errorf("the paused process settled its lost attempt (%v) or saw no loss (%v)", settled.Load(), !lost.Load())
		}
		// Its heartbeat works again: it registers a new process id.
		fs.paused.Store(false)
		time.Sleep(2 * intake.DefaultHeartbeatInterval)
		synctest.Wait()
		fs.mu.Lock()
		n := fs.registered
		fs.mu.Unlock()
		if n != 2 {
			t.Errorf("the paused process registered %d times; want 2 (a new id after its heartbeat lapsed)", n)
		}
	})
}

// pausable fails heartbeat renewals while paused.
type pausable struct {
	*memstore.Store
	paused     atomic.Bool
	mu         sync.Mutex
	registered int
}

func (p *pausable) Beat(ctx context.Context, id string, until, now time.Time) (bool, error) {
	if p.paused.Load() {
		return false, errors.New("paused")
	}
	return p.Store.Beat(ctx, id, until, now)
}

func (p *pausable) Register(ctx context.Context, id string, until time.Time) (bool, error) {
	if p.paused.Load() {
		return false, errors.New("paused")
	}
	p.mu.Lock()
	p.registered++
	p.mu.Unlock()
	return p.Store.Register(ctx, id, until)
}

// TestCloseLeaves: a clean Close removes the heartbeat, so nothing waits
// for it to lapse; a Start registers a fresh id.
func TestCloseLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &mortal{Store: memstore.New()}
		r := newRunner(t, intake.Config{Store: p, Handler: nop})
		start(t, r)
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		start(t, r)
		p.mu.Lock()
		reg, left := append([]string(nil), p.registered...), append([]string(nil), p.left...)
		p.mu.Unlock()
		if len(reg) != 2 || reg[0] == reg[1] || len(left) != 1 || left[0] != reg[0] {
			t.Errorf("registered %q, left %q; want two distinct ids, the first left", reg, left)
		}
		if ok, err := p.Beat(t.Context(), reg[0], time.Now().Add(time.Second), time.Now()); err != nil || ok {
			t.Errorf("Beat of the id that left = %v, %v; want false", ok, err)
		}
	})
}

// TestNoHeartbeat: with NoHeartbeat the runner registers nothing and its
// claims carry no owner.
func TestNoHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &mortal{Store: memstore.New()}
		r := newRunner(t, intake.Config{Store: p, NoHeartbeat: true, Handler: nop})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.registered) != 0 {
			t.Errorf("registered %q with NoHeartbeat", p.registered)
		}
	})
}
