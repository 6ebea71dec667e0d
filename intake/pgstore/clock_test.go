package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
)

// TestSkewedHostNeverTakesALiveLease runs two stores on one table against
// one database: an honest one, and one whose host clock runs a minute
// ahead. The skewed host would see the honest host's 30 s lease as over;
// the store refuses its claims and heartbeats with a *ClockSkewError
// instead, and the live lease stays untouched.
func TestSkewedHostNeverTakesALiveLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	honest, pool := newStore(t)
	skewed, err := pgstore.New(ctx, pool, pgstore.Config{Table: honest.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ahead := func() time.Time { return time.Now().Add(time.Minute) }
	pgstore.SetClock(skewed, ahead)

	now := time.Now().Truncate(time.Millisecond)
	mustAdd(t, honest, 1, now.UnixMilli()-base.UnixMilli())
	if ok, err := honest.Register(ctx, "honest", now.Add(10*time.Second)); err != nil || !ok {
		t.Fatalf("honest Register = %v, %v", ok, err)
	}
	live := intake.ClaimOpts{Now: now, LeaseUntil: now.Add(30 * time.Second), MaxAttempts: 5}
	first, ok, err := honest.ClaimAs(ctx, 1, live, intake.ProcessClaim{Process: "honest"})
	if err != nil || !ok {
		t.Fatalf("honest ClaimAs = %v, %v", ok, err)
	}

	// What an intake on the skewed host passes: its own clock.
	t1 := ahead().Truncate(time.Millisecond)
	steal := intake.ClaimOpts{Now: t1, LeaseUntil: t1.Add(30 * time.Second), MaxAttempts: 5}
	for name, claim := range map[string]func() error{
		"Claim": func() error { _, _, err := skewed.Claim(ctx, 1, steal); return err },
		"ClaimAs": func() error {
			_, _, err := skewed.ClaimAs(ctx, 1, steal, intake.ProcessClaim{Process: "skewed"})
			return err
		},
		"ClaimInOrder": func() error {
			_, _, err := skewed.ClaimInOrder(ctx, 1, steal, intake.ProcessClaim{})
			return err
		},
		"AddBatch": func() error {
			_, err := skewed.AddBatch(ctx, []intake.AddRequest{{
				Incoming: intake.Incoming{UpdateID: 2, Body: []byte(`{"update_id":2}`), ReceivedAt: t1}, Claim: &steal}})
			return err
		},
		"Register": func() error { _, err := skewed.Register(ctx, "skewed", t1.Add(10*time.Second)); return err },
		"Beat":     func() error { _, err := skewed.Beat(ctx, "honest", t1.Add(10*time.Second), t1); return err },
	} {
		err := claim()
		var cse *pgstore.ClockSkewError
		if !errors.As(err, &cse) || !errors.Is(err, pgstore.ErrClockSkew) {
			t.Errorf("skewed %s = %v; want a *pgstore.ClockSkewError", name, err)
			continue
		}
		if cse.Skew < 55*time.Second || cse.Skew > 65*time.Second || cse.Bound != pgstore.DefaultMaxClockSkew {
			t.Errorf("skewed %s: %+v; want a skew of about +1m and the default bound", name, cse)
		}
	}
	if owns, err := honest.Owns(ctx, first, time.Now()); err != nil || !owns {
		t.Fatalf("honest Owns after the skewed claims = %v, %v; the live lease was taken", owns, err)
	}
	if _, found, err := honest.Get(ctx, 2); err != nil || found {
		t.Errorf("Get(2) after the skewed claimed add = found %v, %v; want nothing recorded", found, err)
	}
	if ok, err := honest.Beat(ctx, "honest", time.Now().Add(10*time.Second), time.Now()); err != nil || !ok {
		t.Errorf("honest Beat = %v, %v; the skewed Beat changed its heartbeat", ok, err)
	}

	// Once the skewed host's clock is fixed, it is accepted again.
	pgstore.SetClock(skewed, time.Now)
	if ok, err := skewed.Register(ctx, "fixed", time.Now().Add(10*time.Second)); err != nil || !ok {
		t.Errorf("Register after the clock was fixed = %v, %v", ok, err)
	}

	// Without the check (-1), the skewed host would have taken the lease.
	unchecked, err := pgstore.New(ctx, pool, pgstore.Config{Table: honest.Table(), MaxClockSkew: -1})
	if err != nil {
		t.Fatal(err)
	}
	pgstore.SetClock(unchecked, ahead)
	if id, ok, err := unchecked.Claim(ctx, 1, steal); err != nil || !ok {
		t.Fatalf("unchecked skewed Claim = %v, %v, %v; want it to take the lease (what the check prevents)", id, ok, err)
	}
}

// TestClockBoundValidated checks the bound's range.
func TestClockBoundValidated(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	for _, d := range []time.Duration{-2, time.Microsecond, 2 * time.Minute} {
		if _, err := pgstore.New(t.Context(), pool, pgstore.Config{MaxClockSkew: d}); err == nil {
			t.Errorf("New with MaxClockSkew %v succeeded; want an error", d)
		}
	}
}

// TestOwnsFunctionAtDatabaseClock calls <table>_owns and <table>_once
// without a time: the lease is judged at the database's clock, and only a
// processing row is owned (a completed one is not, though its lease has a
// minute to run and the identity is the one that completed it).
func TestOwnsFunctionAtDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, pool := newStore(t)
	now := time.Now().Truncate(time.Millisecond)
	for id := int64(1); id <= 3; id++ {
		mustAdd(t, st, id, 0)
	}
	live := mustClaimOwned(t, st, 1, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 5})
	lapsed := mustClaimOwned(t, st, 2, intake.ClaimOpts{Now: now.Add(-time.Minute), LeaseUntil: now.Add(-time.Second), MaxAttempts: 5})
	done := mustClaimOwned(t, st, 3, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 5})
	if ok, err := st.Settle(ctx, done, intake.Settlement{State: intake.StateCompleted, At: now}); err != nil || !ok {
		t.Fatalf("Settle(completed) = %v, %v", ok, err)
	}
	for _, c := range []struct {
		id   intake.Identity
		want bool
	}{{live, true}, {lapsed, false}, {done, false}} {
		var owns, once bool
		q := "SELECT " + st.Table() + "_owns($1, $2, $3)"
		if err := pool.QueryRow(ctx, q, c.id.UpdateID, c.id.Attempt, c.id.ClaimID).Scan(&owns); err != nil {
			t.Fatal(err)
		}
		q = "SELECT " + st.Table() + "_once($1, $2, $3, effect => 'e')"
		if err := pool.QueryRow(ctx, q, c.id.UpdateID, c.id.Attempt, c.id.ClaimID).Scan(&once); err != nil {
			t.Fatal(err)
		}
		if owns != c.want || once != c.want {
			t.Errorf("update %d: owns, once without a time = %v, %v; want %v", c.id.UpdateID, owns, once, c.want)
		}
	}
}
