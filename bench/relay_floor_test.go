package main

import (
	"database/sql"
	"path/filepath"
	"testing"
)

// TestRelayFloorSQLite drives the floor on SQLite with the relay's load
// generator and checks that every update reached the endpoint once and
// that its row was recorded and settled by the time the floor stops.
func TestRelayFloorSQLite(t *testing.T) {
	t.Parallel()
	sink, err := startRelaySink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	dir := t.TempDir()
	floors, stop, err := startRelayFloors(t.Context(), dir, "", sink.url)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if len(floors) != 1 || floors[0].name != "floor-sqlite" {
		stop()
		t.Fatalf("floors %+v, want floor-sqlite alone without PostgreSQL", floors)
	}
	gen := newRelayLoad(8, 5)
	defer gen.close()
	const n = 200
	res, err := gen.run(t.Context(), sink, floors[0].url, n)
	stop() // waits for the forward workers and so for their settlements
	if err != nil {
		t.Fatal(err)
	}
	if res.duplicates != 0 || res.reposts != 0 {
		t.Errorf("duplicates %d, re-posts %d; want none on loopback", res.duplicates, res.reposts)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "floor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, settled int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*), count(settled_at) FROM floor`).Scan(&rows, &settled); err != nil {
		t.Fatal(err)
	}
	if rows != n || settled != n {
		t.Fatalf("floor table has %d rows, %d settled; want %d and %d", rows, settled, n, n)
	}
}
