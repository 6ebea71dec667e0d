package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
)

// The least contract floor (floor-min-*): the writes DESIGN's guarantees
// ask for an update handled once, in the smallest layout the bench could
// find, on a schema of the bench's own rather than tgrelay's store. It
// measures what the guarantees cost apart from how our stores lay them
// out, so serve's distance from it is what our layout costs.
//
// What a row must hold, and why:
//
//   - update_id (the primary key) and body: the durable record before the
//     200, and the duplicate check, as in the bare floor;
//   - state, claim_id, attempts and due_at (the lease's end): the claim
//     that fences every later write, the attempt ceiling, and the lease a
//     sweep reads to take over an update whose process died;
//   - chat: the key strict order reads;
//   - after the forward, a settlement fenced by the claim, with the
//     attempt's record (start, end, the app's status and answer).
//
// And one index: live rows by due time, without which a sweep would read
// every settled row the retention keeps. Everything else our stores keep
// an index for (update-id order of live rows, strict chat order, pruning
// by settlement time, state counts) this floor does without: each is the
// answer to a question a design could answer more slowly.
//
// A claimed row's state is 1, a completed one's 2.

// floorMinSQLite is the least contract floor on SQLite, opened as the
// bare floor is (as sqlitestore opens its writer).
type floorMinSQLite struct {
	*floorSQLite
}

func openFloorMinSQLite(ctx context.Context, path string) (*floorMinSQLite, error) {
	db, err := openFloorSQLiteDB(path)
	if err != nil {
		return nil, fmt.Errorf("floor-min sqlite: %w", err)
	}
	s := &floorMinSQLite{&floorSQLite{db: db}}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS floor_min (update_id INTEGER PRIMARY KEY, body TEXT NOT NULL,
			state INTEGER NOT NULL, claim_id INTEGER NOT NULL, attempts INTEGER NOT NULL, due_at INTEGER NOT NULL,
			chat TEXT NOT NULL, received_at INTEGER NOT NULL, settled_at INTEGER,
			rec_started INTEGER, rec_ended INTEGER, rec_status INTEGER, rec_body BLOB)`,
		`CREATE INDEX IF NOT EXISTS floor_min_live ON floor_min (due_at) WHERE state = 1`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("floor-min sqlite: %w", err)
		}
	}
	if s.insert, err = db.PrepareContext(ctx, `INSERT INTO floor_min (update_id, body, state, claim_id, attempts, due_at, chat, received_at)
		VALUES (?1, ?2, 1, ?3, 1, ?4, ?5, ?6) ON CONFLICT DO NOTHING`); err == nil {
		s.update, err = db.PrepareContext(ctx, `UPDATE floor_min SET state = 2, settled_at = ?1,
			rec_started = ?2, rec_ended = ?3, rec_status = 200, rec_body = x''
			WHERE update_id = ?4 AND claim_id = ?5 AND state = 1`)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("floor-min sqlite: %w", err)
	}
	return s, nil
}

func (s *floorMinSQLite) add(ctx context.Context, rows []floorRow) ([]bool, error) {
	return s.insertEach(ctx, rows, func(r floorRow, now time.Time) []any {
		return []any{r.id, r.body, r.claimID, now.Add(intake.DefaultLeaseDuration).UnixMilli(), r.chat, now.UnixMilli()}
	})
}

// settle settles rows in one transaction, each fenced by its claim.
func (s *floorMinSQLite) settle(ctx context.Context, rows []floorSettle) error {
	return s.updateEach(ctx, rows, true, func(r floorSettle, now time.Time) []any {
		return []any{now.UnixMilli(), r.started.UnixMilli(), r.ended.UnixMilli(), r.id, r.claimID}
	})
}

func (*floorMinSQLite) keepsChat() {}

func (s *floorMinSQLite) count(ctx context.Context) (n int64, err error) {
	return n, s.db.QueryRowContext(ctx, `SELECT count(*) FROM floor_min`).Scan(&n)
}

// floorMinPostgres is the least contract floor on PostgreSQL: one
// multi-row insert and one multi-row fenced update per group commit, as
// the bare floor's.
type floorMinPostgres struct {
	pool *pgxpool.Pool
}

func openFloorMinPostgres(ctx context.Context, url string) (*floorMinPostgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("floor-min postgres: %w", err)
	}
	// Each settlement planned for its own rows. The generic plan, made
	// while the table is empty and kept, finds the rows through the live
	// index, which holds an entry for every row version settled since the
	// last vacuum: its cost grows round by round (61 µs of the server's
	// time an update in session 30's run, against pgstore's 18).
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("floor-min postgres: %w", err)
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS floor_min (update_id bigint PRIMARY KEY, body bytea NOT NULL,
			state smallint NOT NULL, claim_id bigint NOT NULL, attempts int NOT NULL, due_at timestamptz NOT NULL,
			chat text NOT NULL, received_at timestamptz NOT NULL, settled_at timestamptz,
			rec_started timestamptz, rec_ended timestamptz, rec_status int, rec_body bytea)`,
		`CREATE INDEX IF NOT EXISTS floor_min_live ON floor_min (due_at) WHERE state = 1`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			pool.Close()
			return nil, fmt.Errorf("floor-min postgres: %w", err)
		}
	}
	return &floorMinPostgres{pool: pool}, nil
}

func (s *floorMinPostgres) add(ctx context.Context, rows []floorRow) ([]bool, error) {
	ids := make([]int64, len(rows))
	claims := make([]int64, len(rows))
	bodies := make([][]byte, len(rows))
	chats := make([]string, len(rows))
	for i, r := range rows {
		ids[i], claims[i], bodies[i], chats[i] = r.id, r.claimID, r.body, r.chat
	}
	lease := time.Now().Add(intake.DefaultLeaseDuration)
	got, err := s.pool.Query(ctx, `INSERT INTO floor_min (update_id, body, state, claim_id, attempts, due_at, chat, received_at)
		SELECT u.id, u.body, 1, u.claim, 1, $5, u.chat, now()
		FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::text[]) AS u(id, body, claim, chat)
		ON CONFLICT DO NOTHING RETURNING update_id`, ids, bodies, claims, chats, lease)
	if err != nil {
		return nil, err
	}
	return addedRows(rows, got)
}

// settle settles rows in one statement, each fenced by its claim; a row
// whose claim does not match fails the batch.
func (s *floorMinPostgres) settle(ctx context.Context, rows []floorSettle) error {
	ids := make([]int64, len(rows))
	claims := make([]int64, len(rows))
	started := make([]time.Time, len(rows))
	ended := make([]time.Time, len(rows))
	for i, r := range rows {
		ids[i], claims[i], started[i], ended[i] = r.id, r.claimID, r.started, r.ended
	}
	tag, err := s.pool.Exec(ctx, `UPDATE floor_min AS f SET state = 2, settled_at = now(),
		rec_started = u.started, rec_ended = u.ended, rec_status = 200, rec_body = ''::bytea
		FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::timestamptz[]) AS u(id, claim, started, ended)
		WHERE f.update_id = u.id AND f.claim_id = u.claim AND f.state = 1`, ids, claims, started, ended)
	if err == nil && tag.RowsAffected() != int64(len(rows)) {
		err = fmt.Errorf("%d of %d settlements refused", int64(len(rows))-tag.RowsAffected(), len(rows))
	}
	return err
}

func (*floorMinPostgres) keepsChat() {}

func (s *floorMinPostgres) count(ctx context.Context) (n int64, err error) {
	return n, s.pool.QueryRow(ctx, `SELECT count(*) FROM floor_min`).Scan(&n)
}

func (s *floorMinPostgres) close() { s.pool.Close() }
