package main

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// TestRelayFloorSQLite drives the floor on SQLite with the relay's load
// generator, forwarding each way the floors can, and checks that every
// update reached the endpoint once and that its row was recorded and
// settled by the time the floor stops.
func TestRelayFloorSQLite(t *testing.T) {
	t.Parallel()
	for _, via := range []string{floorForwardServe, floorForwardNetHTTP} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			testRelayFloorSQLite(t, via)
		})
	}
	if _, err := startRelayFloor(nil, "http://127.0.0.1:1/", "carrier pigeon"); err == nil {
		t.Error("a floor forwarding an unknown way started")
	}
}

func testRelayFloorSQLite(t *testing.T, via string) {
	sink, err := startRelaySink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	dir := t.TempDir()
	floors, stop, err := startRelayFloors(t.Context(), dir, "", sink.url, via)
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

// TestRelayFloorContractSQLite drives the contract floor with the relay's
// load generator and checks that every update reached the endpoint once,
// and that sqlitestore holds each one completed under the claim its add
// recorded, with the attempt's record.
func TestRelayFloorContractSQLite(t *testing.T) {
	t.Parallel()
	st, err := openFloorContractSQLite(t.Context(), filepath.Join(t.TempDir(), "floor-store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	const n = 200
	driveFloor(t, st, n)
	admin := st.st.(intake.AdminStore)
	stats, err := admin.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := stats.Count[intake.StateCompleted]; got != n {
		t.Fatalf("%d rows completed (%v), want %d", got, stats.Count, n)
	}
	rows, err := admin.List(t.Context(), intake.ListQuery{Limit: 1})
	if err != nil || len(rows) != 1 {
		t.Fatalf("List: %v, %d rows", err, len(rows))
	}
	recs, err := admin.Attempts(t.Context(), rows[0].UpdateID)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Outcome != intake.AttemptCompleted || recs[0].Process != st.process || recs[0].ClaimID == "" {
		t.Fatalf("attempts of update %d: %+v, want one completed record by process %s under its claim", rows[0].UpdateID, recs, st.process)
	}
}

// TestRelayFloorMinSQLite drives the least contract floor with the relay's
// load generator and checks that every update reached the endpoint once and
// was settled under the claim its add recorded, with the attempt's record;
// and that the settlement is fenced: a wrong claim settles nothing.
func TestRelayFloorMinSQLite(t *testing.T) {
	t.Parallel()
	st, err := openFloorMinSQLite(t.Context(), filepath.Join(t.TempDir(), "floor-min.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	const n = 200
	driveFloor(t, st, n)
	var rows, settled, chats int
	if err := st.db.QueryRowContext(t.Context(), `SELECT count(*), count(*) FILTER (WHERE state = 2 AND rec_status = 200 AND rec_ended >= rec_started), count(DISTINCT chat) FROM floor_min`).Scan(&rows, &settled, &chats); err != nil {
		t.Fatal(err)
	}
	if rows != n || settled != n || chats != 5 {
		t.Fatalf("floor_min has %d rows, %d settled with a record, %d chats; want %d, %d, 5", rows, settled, chats, n, n)
	}

	// A fresh row, claimed as 7: a settlement under 8 is refused, and
	// leaves the row live.
	if added, err := st.add(t.Context(), []floorRow{{id: 1 << 40, body: []byte(`{}`), claimID: 7}}); err != nil || !added[0] {
		t.Fatalf("add: %v, %v", added, err)
	}
	now := time.Now()
	if err := st.settle(t.Context(), []floorSettle{{id: 1 << 40, claimID: 8, started: now, ended: now}}); err == nil {
		t.Fatal("a settlement under another claim was accepted")
	}
	if err := st.settle(t.Context(), []floorSettle{{id: 1 << 40, claimID: 7, started: now, ended: now}}); err != nil {
		t.Fatalf("the settlement under the row's claim: %v", err)
	}
}

// driveFloor serves a floor over st (which it leaves open) and sends it n
// updates over 5 chats with the relay's load generator, checking that each
// reached the endpoint once; it returns when every forwarded row's
// settlement has.
func driveFloor(t *testing.T, st floorStore, n int) {
	t.Helper()
	sink, err := startRelaySink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	f, err := startRelayFloor(st, sink.url, floorForwardServe)
	if err != nil {
		t.Fatal(err)
	}
	gen := newRelayLoad(8, 5)
	defer gen.close()
	res, err := gen.run(t.Context(), sink, f.url, n)
	f.relayServer.close()
	close(f.queue)
	f.workers.Wait()
	f.settling.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.duplicates != 0 || res.reposts != 0 {
		t.Errorf("duplicates %d, re-posts %d; want none on loopback", res.duplicates, res.reposts)
	}
}

// TestRelayFloorAddOnlySQLite drives the write-ahead floor and checks that
// every update reached the endpoint once and was recorded, and that none
// was settled: it writes nothing after the forward.
func TestRelayFloorAddOnlySQLite(t *testing.T) {
	t.Parallel()
	bare, err := openFloorSQLite(t.Context(), filepath.Join(t.TempDir(), "floor-add.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.close()
	const n = 200
	driveFloor(t, floorAddOnly{bare}, n)
	var rows, settled int
	if err := bare.db.QueryRowContext(t.Context(), `SELECT count(*), count(settled_at) FROM floor`).Scan(&rows, &settled); err != nil {
		t.Fatal(err)
	}
	if rows != n || settled != 0 {
		t.Fatalf("floor table has %d rows, %d settled; want %d and none", rows, settled, n)
	}
}

// TestRelayFloorLog drives the log-shaped contract floor on SQLite and on
// PostgreSQL, with settlements waited for and not, and checks that every
// update reached the endpoint once, was recorded with its chat, and was
// settled: its lease entry gone and its attempt's record appended under
// its claim. And that the settlement is fenced: one under another claim is
// refused and leaves the lease.
func TestRelayFloorLog(t *testing.T) {
	t.Parallel()
	cluster, pgErr := pgtest.Start(t.Context(), pgtest.Options{Fast: true})
	if pgErr == nil {
		t.Cleanup(func() { _ = cluster.Stop() })
	}
	engines := map[string]func(t *testing.T, wait bool) *floorLog{
		"sqlite": func(t *testing.T, wait bool) *floorLog {
			st, err := openFloorLogSQLite(t.Context(), filepath.Join(t.TempDir(), "floor-log.db"), wait)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"postgres": func(t *testing.T, wait bool) *floorLog {
			if errors.Is(pgErr, pgtest.ErrNotInstalled) && os.Getenv(pgtest.EnvRequire) != "1" {
				t.Skipf("PostgreSQL is not installed (%v); set %s=1 to fail instead", pgErr, pgtest.EnvRequire)
			}
			if pgErr != nil {
				t.Fatal(pgErr)
			}
			url, err := cluster.CreateDatabase(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			st, err := openFloorLogPostgres(t.Context(), url, wait)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range engines {
		for _, wait := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/wait=%v", name, wait), func(t *testing.T) {
				t.Parallel()
				st := open(t, wait)
				defer st.close()
				const n = 200
				driveFloor(t, st, n)
				st.flush() // the settlements no add carried
				rows, chats, live, done := floorLogCounts(t, st)
				if rows != n || chats != 5 || live != 0 || done != n {
					t.Fatalf("%d rows over %d chats, %d leases left, %d records under their claims; want %d over 5, none, %d", rows, chats, live, done, n, n)
				}

				row := floorRow{id: 1 << 40, body: []byte(`{}`), claimID: 7, due: new(int64)}
				if added, err := st.add(t.Context(), []floorRow{row}); err != nil || !added[0] {
					t.Fatalf("add: %v, %v", added, err)
				}
				if !wait {
					return // nobody hears of a refused settlement it does not wait for
				}
				wrong := row
				wrong.claimID = 8
				if err := st.settleRow(t.Context(), wrong, time.Now(), nil); err == nil {
					t.Fatal("a settlement under another claim was accepted")
				}
				if _, _, live, _ := floorLogCounts(t, st); live != 1 {
					t.Fatalf("leases after a refused settlement: %d, want the row's", live)
				}
				if err := st.settleRow(t.Context(), row, time.Now(), nil); err != nil {
					t.Fatalf("the settlement under the row's claim: %v", err)
				}
				if _, _, live, _ := floorLogCounts(t, st); live != 0 {
					t.Fatalf("leases after the settlement: %d, want none", live)
				}
			})
		}
	}
}

// floorLogCounts counts st's rows, their chats, the lease entries left and
// the records appended under their rows' claims.
func floorLogCounts(t *testing.T, st *floorLog) (rows, chats, live, done int) {
	t.Helper()
	const q = `SELECT
		(SELECT count(*) FROM log_rows), (SELECT count(DISTINCT chat) FROM log_rows),
		(SELECT count(*) FROM log_live),
		(SELECT count(*) FROM log_done d JOIN log_rows r USING (update_id, claim_id) WHERE d.ended_at >= d.started_at)`
	var err error
	switch e := st.eng.(type) {
	case *floorLogSQLite:
		err = e.db.QueryRowContext(t.Context(), q).Scan(&rows, &chats, &live, &done)
	case *floorLogPostgres:
		err = e.pool.QueryRow(t.Context(), q).Scan(&rows, &chats, &live, &done)
	default:
		t.Fatalf("engine %T", e)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rows, chats, live, done
}
