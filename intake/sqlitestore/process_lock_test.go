package sqlitestore_test

import (
	"os"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// TestDeadProcessReapedByItsLock: a process registered on one store is
// reaped by another store on the same file as soon as its lock is free
// (it died), though its heartbeat still looks live; while it holds its
// lock, only its heartbeat decides.
func TestDeadProcessReapedByItsLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dead, path := openStore(t, sqlitestore.Config{})
	alive, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alive.Close() })

	now := time.Now().Truncate(time.Millisecond)
	for _, p := range []struct {
		s  *sqlitestore.Store
		id string
	}{{dead, "dead"}, {alive, "alive"}} {
		if ok, err := p.s.Register(ctx, p.id, now.Add(time.Hour)); err != nil || !ok {
			t.Fatalf("Register(%s) = %v, %v", p.id, ok, err)
		}
	}
	if _, err := dead.Add(ctx, intake.Incoming{UpdateID: 1, Body: []byte(`{"update_id":1}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	held, ok, err := dead.ClaimAs(ctx, 1, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 5}, intake.ProcessClaim{Process: "dead"})
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if n, err := alive.Reap(ctx, now); err != nil || n != 0 {
		t.Fatalf("Reap while both hold their locks = %d, %v; want 0", n, err)
	}
	if _, ok, _ := alive.ClaimAs(ctx, 1, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 5}, intake.ProcessClaim{Process: "alive"}); ok {
		t.Fatal("claimed a row of a live process")
	}

	sqlitestore.DropProcessLocks(dead) // the process dies: the kernel drops its lock
	if n, err := alive.Reap(ctx, now); err != nil || n != 1 {
		t.Fatalf("Reap after the death = %d, %v; want 1", n, err)
	}
	if n, err := alive.Reap(ctx, now); err != nil || n != 0 {
		t.Fatalf("a second Reap = %d, %v; want 0", n, err)
	}
	id, ok, err := alive.ClaimAs(ctx, 1, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 5}, intake.ProcessClaim{Process: "alive"})
	if err != nil || !ok || id.Attempt != 2 {
		t.Fatalf("takeover = %+v, %v, %v; want attempt 2", id, ok, err)
	}
	if owns, err := dead.Owns(ctx, held, now); err != nil || owns {
		t.Errorf("the dead process still owns: %v, %v", owns, err)
	}
	if ok, err := alive.Beat(ctx, "alive", now.Add(2*time.Hour), now); err != nil || !ok {
		t.Errorf("the live process's Beat = %v, %v; Reap removed it", ok, err)
	}
}

// TestRefusedRegisterKeepsTheLiveLock: a second Register of a live process
// id is refused and leaves that process's lock file in place, so its death
// is still seen at once by the lock rather than after its heartbeat lapses.
func TestRefusedRegisterKeepsTheLiveLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := openStore(t, sqlitestore.Config{})
	now := time.Now().Truncate(time.Millisecond)
	if ok, err := s.Register(ctx, "a", now.Add(time.Hour)); err != nil || !ok {
		t.Fatalf("Register = %v, %v", ok, err)
	}
	lock := path + "-procs/a.lock"
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("after Register: %v", err)
	}
	if ok, err := s.Register(ctx, "a", now.Add(time.Hour)); err != nil || ok {
		t.Fatalf("second Register = %v, %v; want refused", ok, err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("a refused Register removed the live process's lock file: %v", err)
	}
}
