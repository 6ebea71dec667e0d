package pgstore_test

import (
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake/pgstore"
)

func TestSchemaVersionOfACurrentTable(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	v, latest, err := st.SchemaVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := pgstore.Migrations(st.Table())
	if err != nil {
		t.Fatal(err)
	}
	if v != latest || latest != ms[len(ms)-1].Version {
		t.Errorf("SchemaVersion = %d, %d; want both %d", v, latest, ms[len(ms)-1].Version)
	}
}

// TestClockSkewMeasuresThisHostAgainstTheDatabase gives one store a clock a
// minute ahead and another the host's own: each measures its own offset
// from the database's clock, within the uncertainty it reports.
func TestClockSkewMeasuresThisHostAgainstTheDatabase(t *testing.T) {
	t.Parallel()
	honest, pool := newStore(t)
	skewed, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: honest.Table()})
	if err != nil {
		t.Fatal(err)
	}
	pgstore.SetClock(skewed, func() time.Time { return time.Now().Add(time.Minute) })
	// The database runs on this host, so its clock is this host's; the
	// database's timestamps have microseconds, and the measurement is off
	// by at most half the query's round trip, which it reports.
	const resolution = time.Millisecond
	for _, tc := range []struct {
		st   *pgstore.Store
		want time.Duration
	}{{honest, 0}, {skewed, time.Minute}} {
		skew, within, err := tc.st.ClockSkew(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d := (skew - tc.want).Abs(); d > within+resolution {
			t.Errorf("ClockSkew = %v ± %v, want %v", skew, within, tc.want)
		}
	}
}
