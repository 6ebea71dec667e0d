package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

// base is a fixed intake clock reading; tests move it by hand.
var base = time.UnixMilli(1_772_355_600_000).UTC()

// openStore opens a store on a fresh file in t's temp dir and closes it at
// the end of the test.
func openStore(t *testing.T, cfg sqlitestore.Config) (*sqlitestore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "intake.db")
	s, err := sqlitestore.Open(t.Context(), path, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, path
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) intake.Store {
		s, _ := openStore(t, sqlitestore.Config{})
		return s
	})
}

// callerDB opens a handle of the test's own, configured as New's doc asks;
// it is closed when the test ends.
func callerDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConformanceNew runs the suite on a store that wraps a caller's handle
// configured as New's doc asks, with a non-default table name.
func TestConformanceNew(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) intake.Store {
		s, err := sqlitestore.New(t.Context(), callerDB(t), sqlitestore.Config{Table: "bot_updates"})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestConfigIsValidatedBeforeUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name  string
		path  string
		cfg   sqlitestore.Config
		field string // named in the error; empty means the config is valid
	}{
		{name: "injection", cfg: sqlitestore.Config{Table: `x"; DROP TABLE y; --`}, field: "Config.Table"},
		{name: "dash", cfg: sqlitestore.Config{Table: "telegram-updates"}, field: "Config.Table"},
		{name: "leading digit", cfg: sqlitestore.Config{Table: "1updates"}, field: "Config.Table"},
		{name: "56 characters", cfg: sqlitestore.Config{Table: strings.Repeat("a", 56)}, field: "Config.Table"},
		{name: "space", cfg: sqlitestore.Config{Table: "a b"}, field: "Config.Table"},
		{name: "55 characters", cfg: sqlitestore.Config{Table: strings.Repeat("a", 55)}},
		{name: "keyword", cfg: sqlitestore.Config{Table: "select"}},
		{name: "underscore", cfg: sqlitestore.Config{Table: "_u9"}},
		{name: "synchronous OFF", cfg: sqlitestore.Config{Synchronous: "OFF"}, field: "Config.Synchronous"},
		{name: "synchronous lower case", cfg: sqlitestore.Config{Synchronous: "full"}, field: "Config.Synchronous"},
		{name: "synchronous NORMAL", cfg: sqlitestore.Config{Synchronous: "NORMAL"}},
		{name: "busy timeout negative", cfg: sqlitestore.Config{BusyTimeout: -time.Second}, field: "Config.BusyTimeout"},
		{name: "busy timeout too long", cfg: sqlitestore.Config{BusyTimeout: sqlitestore.MaxBusyTimeout + time.Millisecond}, field: "Config.BusyTimeout"},
		{name: "busy timeout sub-millisecond", cfg: sqlitestore.Config{BusyTimeout: 1500 * time.Microsecond}, field: "Config.BusyTimeout"},
		{name: "read conns negative", cfg: sqlitestore.Config{ReadConns: -1}, field: "Config.ReadConns"},
		{name: "read conns too many", cfg: sqlitestore.Config{ReadConns: sqlitestore.MaxReadConns + 1}, field: "Config.ReadConns"},
		{name: "file check too often", cfg: sqlitestore.Config{FileCheckInterval: time.Microsecond}, field: "Config.FileCheckInterval"},
		{name: "file check too rare", cfg: sqlitestore.Config{FileCheckInterval: sqlitestore.MaxFileCheckInterval + time.Second}, field: "Config.FileCheckInterval"},
		{name: "empty path", path: "-", field: "path"},
		{name: "memory path", path: ":memory:", field: "path"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, strings.Repeat("x", i+1)+".db")
			switch tc.path {
			case "-":
				path = ""
			case "":
			default:
				path = tc.path
			}
			s, err := sqlitestore.Open(t.Context(), path, tc.cfg)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				t.Cleanup(func() { s.Close() })
				if _, err := s.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte("{}"), ReceivedAt: base}); err != nil {
					t.Fatalf("Add: %v", err)
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("Open accepted %+v", tc.cfg)
			}
			if !errors.Is(err, sqlitestore.ErrInvalidConfig) {
				t.Fatalf("Open error %q: want ErrInvalidConfig naming %s", err, tc.field)
			}
			if field, ok := strings.CutPrefix(tc.field, "Config."); ok {
				ce, isCE := errors.AsType[*sqlitestore.ConfigError](err)
				if !isCE || ce.Field != field {
					t.Fatalf("Open error %q: want a *ConfigError for %s", err, field)
				}
			} else if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Open error %q: want one naming %s", err, tc.field)
			}
		})
	}
}

func TestConfigTableCheckedBeforeSQL(t *testing.T) {
	t.Parallel()
	// Migrations and New check the name too, before any statement runs.
	if _, err := sqlitestore.Migrations("a-b"); !errors.Is(err, sqlitestore.ErrInvalidConfig) {
		t.Errorf("Migrations(a-b) error = %v, want ErrInvalidConfig", err)
	}
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = sqlitestore.New(t.Context(), db, sqlitestore.Config{Table: "x; DROP TABLE sqlite_master"})
	if !errors.Is(err, sqlitestore.ErrInvalidConfig) || !strings.Contains(err.Error(), "Table is refused") {
		t.Fatalf("New error = %v, want ErrInvalidConfig naming Config.Table", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("New with a bad name touched the database: %d objects, %v", n, err)
	}
	// Options New cannot apply are refused, not ignored.
	for _, cfg := range []sqlitestore.Config{{Synchronous: "FULL"}, {BusyTimeout: time.Second}, {ReadConns: 2}, {MustExist: true}} {
		if _, err := sqlitestore.New(t.Context(), db, cfg); !errors.Is(err, sqlitestore.ErrInvalidConfig) {
			t.Errorf("New(%+v) error = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := sqlitestore.New(t.Context(), nil, sqlitestore.Config{}); !errors.Is(err, sqlitestore.ErrInvalidConfig) {
		t.Errorf("New(nil) error = %v, want ErrInvalidConfig", err)
	}
}

func TestOpenConfiguresDurability(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sync string
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 2}, {"FULL", 2}, {"NORMAL", 1}} {
		s, _ := openStore(t, sqlitestore.Config{Synchronous: tc.sync})
		var mode string
		var sync int
		if err := s.DB().QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := s.DB().QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != tc.want {
			t.Errorf("Synchronous %q: journal_mode %s, synchronous %d; want wal, %d", tc.sync, mode, sync, tc.want)
		}
	}
}

func TestAddBatchIsOneTransaction(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	in := func(id int64) intake.Incoming {
		return intake.Incoming{UpdateID: id, Body: []byte(`{"update_id":1}`), ReceivedAt: base}
	}
	// A real constraint in the database makes the middle row fail.
	if _, err := s.DB().Exec(`CREATE TRIGGER refuse_13 BEFORE INSERT ON telegram_updates
		WHEN NEW.update_id = 13 BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	if _, err := addBatch(ctx, s, []intake.Incoming{in(1), in(13), in(2)}); err == nil {
		t.Fatal("AddBatch with a refused row succeeded")
	}
	for _, id := range []int64{1, 2, 13} {
		if _, ok, err := s.Get(ctx, id); err != nil || ok {
			t.Errorf("after a failed batch, Get(%d) = %v, %v; want no row", id, ok, err)
		}
	}

	if ok, err := s.Add(ctx, in(7)); err != nil || !ok {
		t.Fatalf("Add(7) = %v, %v", ok, err)
	}
	got, err := addBatch(ctx, s, []intake.Incoming{in(5), in(7), in(5), in(6)})
	if err != nil {
		t.Fatalf("AddBatch: %v", err)
	}
	if want := []bool{true, false, false, true}; !slices.Equal(got, want) {
		t.Errorf("AddBatch = %v, want %v (existing and repeated ids report false)", got, want)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Count[intake.StatePending] != 3 {
		t.Errorf("pending rows = %d, want 3", st.Count[intake.StatePending])
	}

	// Batches longer than one INSERT statement: a repeat in a later
	// statement reports false, and a refused row in a later statement rolls
	// back the earlier ones too.
	var big []intake.Incoming
	for id := int64(100); id < 350; id++ {
		big = append(big, in(id))
	}
	big[180] = in(100)
	got, err = addBatch(ctx, s, big)
	if err != nil {
		t.Fatalf("AddBatch(250 rows): %v", err)
	}
	for i, ok := range got {
		if ok != (i != 180) {
			t.Errorf("AddBatch(250 rows)[%d] = %v", i, ok)
		}
	}
	big = big[:0]
	for id := int64(400); id < 550; id++ {
		big = append(big, in(id))
	}
	big[130] = in(13)
	if _, err := addBatch(ctx, s, big); err == nil {
		t.Fatal("AddBatch with a refused row in its second statement succeeded")
	}
	if _, ok, err := s.Get(ctx, 400); err != nil || ok {
		t.Errorf("after a failed long batch, Get(400) = %v, %v; want no row", ok, err)
	}

	// A cancelled context records nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := addBatch(cctx, s, []intake.Incoming{in(20), in(21)}); err == nil {
		t.Error("AddBatch with a cancelled context succeeded")
	}
	if _, ok, _ := s.Get(ctx, 20); ok {
		t.Error("a cancelled batch recorded a row")
	}
}

// AddBatch prepares one statement per row count and reuses it: batches of
// the same sizes again (a full statement plus a remainder, then the
// remainder alone) insert the new rows and report the repeats, and after
// Close the cached statements are gone.
func TestAddBatchReusesStatementsUntilClose(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	batch := func(from, n int64) []intake.Incoming {
		var us []intake.Incoming
		for id := from; id < from+n; id++ {
			us = append(us, intake.Incoming{UpdateID: id, Body: []byte(`{"update_id":1}`), ReceivedAt: base})
		}
		return us
	}
	for round, tc := range []struct {
		from, n int64
		newFrom int64 // ids from here on are new
	}{
		{1, 137, 1},
		{100, 137, 138},
		{1000, 37, 1000},
		{1020, 37, 1037},
	} {
		got, err := addBatch(ctx, s, batch(tc.from, tc.n))
		if err != nil {
			t.Fatalf("round %d: AddBatch: %v", round, err)
		}
		for i, ok := range got {
			if want := tc.from+int64(i) >= tc.newFrom; ok != want {
				t.Fatalf("round %d: AddBatch[%d] (id %d) = %v, want %v", round, i, tc.from+int64(i), ok, want)
			}
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Count[intake.StatePending], 236+57; got != want {
		t.Errorf("pending rows = %d, want %d", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := addBatch(ctx, s, batch(5000, 37)); err == nil {
		t.Error("AddBatch after Close succeeded")
	}
}

// TestOwnsTxFencesADomainWrite uses OwnsTx the way a handler does: in a
// BEGIN IMMEDIATE transaction on the store's file, check, write, commit.
func TestOwnsTxFencesADomainWrite(t *testing.T) {
	t.Parallel()
	s, path := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	if _, err := s.DB().Exec(`CREATE TABLE replies (update_id INTEGER PRIMARY KEY, text TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, intake.Incoming{UpdateID: 42, Body: []byte("{}"), ReceivedAt: base}); err != nil {
		t.Fatal(err)
	}
	lease := base.Add(time.Minute)
	first, ok, err := s.Claim(ctx, 42, intake.ClaimOpts{Now: base, LeaseUntil: lease, MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}

	// write is the handler's domain transaction for identity id at time at.
	write := func(id intake.Identity, at time.Time, text string) (bool, error) {
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			return false, err
		}
		defer tx.Rollback()
		owns, err := s.OwnsTx(ctx, tx, id, at)
		if err != nil || !owns {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO replies VALUES (?1, ?2)`, id.UpdateID, text); err != nil {
			return false, err
		}
		return true, tx.Commit()
	}

	// While the owner's transaction is open, a reclaim through another
	// connection to the file cannot slip in: it waits for the write lock
	// (here only 20 ms, so it gives up with SQLITE_BUSY).
	other, err := sqlitestore.Open(ctx, path, sqlitestore.Config{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if owns, err := s.OwnsTx(ctx, tx, first, lease); err != nil || !owns {
		t.Fatalf("OwnsTx at the lease end = %v, %v; want true", owns, err)
	}
	late := intake.ClaimOpts{Now: lease.Add(time.Millisecond), LeaseUntil: lease.Add(time.Minute), MaxAttempts: 5}
	if _, ok, err := other.Claim(ctx, 42, late); err == nil {
		t.Fatalf("a reclaim committed inside the owner's transaction (ok=%v)", ok)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO replies VALUES (42, 'first')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// After the lease lapsed, another worker reclaims; the first identity
	// can no longer pass the fence, the second one can.
	second, ok, err := other.Claim(ctx, 42, late)
	if err != nil || !ok || second.Attempt != 2 || second.ClaimID == first.ClaimID {
		t.Fatalf("reclaim = %+v, %v, %v; want attempt 2 with a new claim id", second, ok, err)
	}
	if _, err := s.DB().Exec(`DELETE FROM replies`); err != nil {
		t.Fatal(err)
	}
	if wrote, err := write(first, late.Now, "stale"); err != nil || wrote {
		t.Errorf("stale identity wrote = %v, %v; want refused", wrote, err)
	}
	// The fence compares every field of the identity, and the lease's end:
	// none of these wrote, though no other claim took the row.
	otherAttempt, otherClaim := second, second
	otherAttempt.Attempt++
	otherClaim.ClaimID = "not-the-claim"
	for _, c := range []struct {
		what string
		id   intake.Identity
		at   time.Time
	}{
		{"another attempt with the claim's id", otherAttempt, late.Now},
		{"the attempt with another claim id", otherClaim, late.Now},
		{"the live identity after its lease end", second, late.LeaseUntil.Add(time.Millisecond)},
	} {
		if wrote, err := write(c.id, c.at, "forged"); err != nil || wrote {
			t.Errorf("%s wrote = %v, %v; want refused", c.what, wrote, err)
		}
	}
	if wrote, err := write(second, late.Now, "fresh"); err != nil || !wrote {
		t.Errorf("live identity wrote = %v, %v; want written", wrote, err)
	}
	var texts []string
	rows, err := s.DB().Query(`SELECT text FROM replies`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		texts = append(texts, s)
	}
	rows.Close()
	if !slices.Equal(texts, []string{"fresh"}) {
		t.Errorf("domain rows = %q, want only the live identity's", texts)
	}
	// Even in a deferred transaction (a handle without _txlock=immediate),
	// OwnsTx itself takes the write lock: a reclaim cannot commit until the
	// transaction ends.
	plain, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	dtx, err := plain.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if owns, err := s.OwnsTx(ctx, dtx, second, late.Now); err != nil || !owns {
		t.Fatalf("OwnsTx in a deferred transaction = %v, %v; want true", owns, err)
	}
	later := intake.ClaimOpts{Now: late.LeaseUntil.Add(time.Millisecond), LeaseUntil: late.LeaseUntil.Add(time.Minute), MaxAttempts: 5}
	if _, ok, err := other.Claim(ctx, 42, later); err == nil {
		t.Fatalf("a reclaim committed inside a deferred transaction after OwnsTx (ok=%v)", ok)
	}
	if err := dtx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if third, ok, err := other.Claim(ctx, 42, later); err != nil || !ok || third.Attempt != 3 {
		t.Fatalf("reclaim after the deferred transaction = %+v, %v, %v; want attempt 3", third, ok, err)
	}

	// The non-transactional twin agrees.
	if owns, err := s.Owns(ctx, first, late.Now); err != nil || owns {
		t.Errorf("Owns(stale) = %v, %v", owns, err)
	}
}

// TestPlansReadOnlyTheRowsTheyNeed pins the query plans that keep the
// sweep from walking finished rows: the due listing reads the live rows'
// partial index, the prune the settled rows' in time order, so that it
// reads the expired rows alone, and the exhaustions' listing and count the
// unacknowledged exhaustions' alone. Without its hint SQLite, which has no
// statistics, pruned through the (state, due_at) index instead, reading
// every completed row a retention keeps on each sweep, on the writer
// connection, while accepts waited for it.
func TestPlansReadOnlyTheRowsTheyNeed(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	for _, tc := range []struct {
		name, sql string
		args      []any
		want      string
	}{
		{"due", sqlitestore.DueSQL, []any{1, 1, 1}, "USING INDEX telegram_updates_live"},
		{"prune", sqlitestore.PruneSQL, []any{1}, "INDEX telegram_updates_settled (state=? AND settled_at<?)"},
		{"exhaustions", sqlitestore.DueExhaustionsSQL, []any{1, 1}, "USING INDEX telegram_updates_unacknowledged (update_id>?)"},
		{"stats", sqlitestore.StatsExtraSQL, nil, "USING INDEX telegram_updates_unacknowledged"},
		{"oldest pending", sqlitestore.StatsExtraSQL, nil, "USING COVERING INDEX telegram_updates_live"},
		{"list failed", sqlitestore.ListSQL, []any{"failed", 10}, "USING INDEX telegram_updates_live"},
	} {
		rows, err := s.DB().Query("EXPLAIN QUERY PLAN "+sqlitestore.FillSQL(tc.sql, "telegram_updates"), tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		joined := strings.Join(plan, "; ")
		if !strings.Contains(joined, tc.want) || strings.Contains(joined, "TEMP B-TREE") {
			t.Errorf("%s plan = %q; want %q and no sort", tc.name, joined, tc.want)
		}
	}
}

// Stats counts the rows in each state from the three partial indexes
// that together hold every row once (migration 010): each is read whole,
// and the table itself is not read.
func TestStatsCountThroughThePartialIndexes(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	rows, err := s.DB().Query("EXPLAIN QUERY PLAN " + sqlitestore.FillSQL(sqlitestore.StatsSQL, "telegram_updates"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var scans []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(detail, "SCAN ") || strings.HasPrefix(detail, "SEARCH ") {
			scans = append(scans, detail)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"SCAN telegram_updates USING COVERING INDEX telegram_updates_live",
		"SCAN telegram_updates USING COVERING INDEX telegram_updates_settled",
		"SCAN telegram_updates USING INDEX telegram_updates_unacknowledged",
	}
	if strings.Join(scans, "; ") != strings.Join(want, "; ") {
		t.Errorf("stats reads\n%s\nwant\n%s", strings.Join(scans, "\n"), strings.Join(want, "\n"))
	}
}

func TestLargeIDsAndTimesRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	id := int64(1) << 40
	at := time.UnixMilli(9_999_999_999_999).UTC()
	body := []byte("{\"update_id\":1099511627776,\"x\":\"\x00\xff\"}")
	if ok, err := s.Add(ctx, intake.Incoming{UpdateID: id, Body: body, ReceivedAt: at}); err != nil || !ok {
		t.Fatalf("Add = %v, %v", ok, err)
	}
	r, ok, err := s.Get(ctx, id)
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if r.UpdateID != id || !r.ReceivedAt.Equal(at) || !r.DueAt.Equal(at) || string(r.Body) != string(body) || !r.SettledAt.IsZero() {
		t.Errorf("row = %+v; want id 2^40, times %v and the body byte for byte", r, at)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte("{}"), ReceivedAt: base}); err == nil {
		t.Fatal("Add after Close succeeded")
	}
}

// TestWriterIsOneImmediateConnection checks the writer layout Open promises:
// one connection, whose transactions hold the write lock from BEGIN.
func TestWriterIsOneImmediateConnection(t *testing.T) {
	t.Parallel()
	s, path := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	if got := s.DB().Stats().MaxOpenConnections; got != 1 {
		t.Errorf("writer MaxOpenConnections = %d, want 1", got)
	}
	other, err := sqlitestore.Open(ctx, path, sqlitestore.Config{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No statement ran in tx yet; BEGIN IMMEDIATE already holds the lock.
	if _, err := other.Add(ctx, intake.Incoming{UpdateID: 1, Body: []byte("{}"), ReceivedAt: base}); err == nil {
		t.Error("another connection wrote while a writer transaction was open")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.Add(ctx, intake.Incoming{UpdateID: 1, Body: []byte("{}"), ReceivedAt: base}); err != nil || !ok {
		t.Errorf("Add after the transaction = %v, %v", ok, err)
	}
}

// addBatch records us unclaimed; see [storetest.Add].
var addBatch = storetest.Add

// Every reader connection of a store from Open keeps at most
// ReaderCacheKiB of page cache; the writer keeps SQLite's default.
func TestReadersKeepASmallPageCache(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "cache.db"), sqlitestore.Config{ReadConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Hold every reader at once, so each one is asked.
	var conns []*sql.Conn
	for range 3 {
		c, err := s.ReadDB().Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		var kib int
		if err := c.QueryRowContext(t.Context(), `PRAGMA cache_size`).Scan(&kib); err != nil {
			t.Fatal(err)
		}
		if kib != -sqlitestore.ReaderCacheKiB {
			t.Errorf("reader %d: cache_size %d; want -%d (KiB)", i, kib, sqlitestore.ReaderCacheKiB)
		}
		c.Close()
	}
	var kib int
	if err := s.DB().QueryRowContext(t.Context(), `PRAGMA cache_size`).Scan(&kib); err != nil || kib != -2000 {
		t.Errorf("writer: cache_size %d, %v; want SQLite's default -2000", kib, err)
	}
}

// AddBatch cuts a batch into INSERTs of a few sizes only: batches of every
// length up to past two full statements leave at most MaxAddSizes
// statements prepared (one per length would keep a statement of up to
// BatchRows rows for every length group commit ever formed, in SQLite's
// memory), and record every row, claimed ones with their identity.
func TestAddBatchKeepsFewStatementsPrepared(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	lease := base.Add(time.Minute)
	id := int64(1)
	for n := 1; n <= 2*sqlitestore.BatchRows+sqlitestore.ChunkStep+3; n++ {
		reqs := make([]intake.AddRequest, n)
		for i := range reqs {
			reqs[i] = intake.AddRequest{Incoming: intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: base}}
			if i%3 == 0 {
				reqs[i].Claim = &intake.ClaimOpts{Now: base, LeaseUntil: lease, MaxAttempts: 3}
			}
			id++
		}
		reqs[n-1].UpdateID = reqs[0].UpdateID // a repeat in the last statement
		res, err := s.AddBatch(ctx, reqs)
		if err != nil {
			t.Fatalf("AddBatch(%d rows): %v", n, err)
		}
		for i, r := range res {
			if want := i == 0 || i < n-1; r.Added != want {
				t.Fatalf("AddBatch(%d rows)[%d].Added = %v; want %v", n, i, r.Added, want)
			}
			if claimed := r.Added && reqs[i].Claim != nil; claimed != (r.Identity.ClaimID != "") {
				t.Fatalf("AddBatch(%d rows)[%d] = %+v; claimed %v", n, i, r, claimed)
			}
		}
	}
	if got, limit := sqlitestore.PreparedAdds(s), sqlitestore.MaxAddSizes; got > limit {
		t.Errorf("%d INSERT statements prepared; want at most %d", got, limit)
	}
	var rows int64
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM telegram_updates`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if want := id - 1 - int64(2*sqlitestore.BatchRows+sqlitestore.ChunkStep+3) + 1; rows != want {
		t.Errorf("%d rows recorded; want %d", rows, want)
	}
}

// addChunks covers every row exactly once, in statements of BatchRows,
// then one of a multiple of ChunkStep, then one of the rest: at most three
// sizes a batch, at most two statements below BatchRows rows, and
// MaxAddSizes sizes in all.
func TestAddChunks(t *testing.T) {
	t.Parallel()
	all := map[int]bool{}
	for n := 1; n <= 3*sqlitestore.BatchRows; n++ {
		c := sqlitestore.AddChunks(n)
		sum, sizes := 0, map[int]bool{}
		for i, k := range c {
			sum += k
			sizes[k], all[k] = true, true
			if k < 1 || k > sqlitestore.BatchRows || k > sqlitestore.ChunkStep && k < sqlitestore.BatchRows && k%sqlitestore.ChunkStep != 0 {
				t.Fatalf("AddChunks(%d) = %v: a chunk of %d rows", n, c, k)
			}
			if i > 0 && k > c[i-1] {
				t.Fatalf("AddChunks(%d) = %v: not in decreasing order", n, c)
			}
		}
		if sum != n || len(sizes) > 3 {
			t.Fatalf("AddChunks(%d) = %v", n, c)
		}
		if n < sqlitestore.BatchRows && len(c) > 2 {
			t.Fatalf("AddChunks(%d) = %v; want at most two statements", n, c)
		}
		if n <= sqlitestore.ChunkStep && len(c) != 1 {
			t.Fatalf("AddChunks(%d) = %v; want one statement", n, c)
		}
	}
	if len(all) != sqlitestore.MaxAddSizes {
		t.Errorf("AddChunks uses %d sizes; want MaxAddSizes = %d", len(all), sqlitestore.MaxAddSizes)
	}
}
