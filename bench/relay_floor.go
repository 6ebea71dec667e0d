package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the driver sqlitestore uses

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// Bounds of the floor variants.
const (
	// floorWorkers is how many forwards run at once: serve's default
	// --concurrency (intake.DefaultMaxConcurrent).
	floorWorkers = 32
	// floorQueue bounds the recorded updates waiting for a forward worker;
	// a full queue holds the webhook's answer back.
	floorQueue = 4096
	// floorMaxBatch is one group commit's largest batch, as serve's
	// (intake.DefaultMaxBatch).
	floorMaxBatch = 256
	// floorCommitBound limits one group commit.
	floorCommitBound = 10 * time.Second
	// floorForwardTries bounds the forward attempts of one update.
	floorForwardTries = 3
)

// floorStore is the least durable work a relay cannot avoid: one row per
// update before the webhook's 200, and its settlement after the forward.
type floorStore interface {
	// add records rows in one transaction, ignoring ids already recorded,
	// and reports which rows were new.
	add(ctx context.Context, rows []floorRow) ([]bool, error)
	// settle marks rows settled in one transaction.
	settle(ctx context.Context, rows []floorSettle) error
	// count counts the recorded rows.
	count(ctx context.Context) (int64, error)
	close()
}

// floorRow is one received update.
type floorRow struct {
	id   int64
	body []byte
	// chat is the update's chat key, for a store that keeps chat order.
	chat string
	// claim receives the identity a claimed add recorded the row under,
	// for a store that records rows claimed (floorContract).
	claim *intake.Identity
	// claimID is the claim identity a store of the bench's own schema
	// records the row under (floorMin); the bare floors ignore it.
	claimID int64
	// due receives the end of the lease the row was recorded with, for
	// a store that keys its leases by it (floorLeaseStore).
	due *int64
}

// floorSettle is one forwarded row's settlement: its id, the claim it
// was recorded under, and when its forward started and ended.
type floorSettle struct {
	id, claimID    int64
	started, ended time.Time
	// answer is the answer a journal floor keeps for replays (the
	// Telegram answer to the call); nil for the relay's floors.
	answer []byte
	// due is the end of the row's lease, for a floorLeaseStore.
	due int64
}

// floorLeaseStore is a floorStore that keys each row's lease by its end,
// which its settlement then names: the floor gives each row a place for
// it (floorRow.due).
type floorLeaseStore interface {
	leasesRows()
}

// floorChatStore is a floorStore that keeps each row's chat key, as
// strict order needs: the floor reads the key from the update for it.
type floorChatStore interface {
	keepsChat()
}

// floorRowSettler is a floorStore that settles each forwarded row by
// itself, with the attempt's start and the answer to keep (nil for none),
// rather than through the floor's own group commit of ids.
type floorRowSettler interface {
	settleRow(ctx context.Context, row floorRow, started time.Time, answer []byte) error
}

// floorAddOnly is the write-ahead floor (floor-add-*): a bare floor's
// row recorded before the webhook's 200 and nothing written after the
// forward. It keeps only DESIGN's first promise, that every update is
// stored durably before Telegram is answered, so no relay that keeps it
// can write less on the same engine.
type floorAddOnly struct{ floorStore }

func (floorAddOnly) addsOnly() {}

// floorAddsOnly is a floorStore whose rows the floor does not settle.
type floorAddsOnly interface {
	addsOnly()
}

// relayFloor is the measured floor of a durable relay: the non-durable
// forwarder plus an update's durable record before the 200 (group
// committed, as serve's) and its settlement after the forward (group
// committed too), with none of the rest of serve: no claims, leases, chat
// order, retries beyond a bounded few, journal or metrics. Its rate's ratio
// to the non-durable forwarder is the ceiling of any durable design on this
// machine.
type relayFloor struct {
	*relayServer
	st      floorStore
	adds    *groupcommit.Group[floorRow, bool]
	settles *groupcommit.Group[floorSettle, struct{}]
	queue   chan floorRow
	// fwd forwards as serve does (forward.Forwarder with its default
	// client); nil forwards through client, net/http's, as the
	// non-durable forwarder does.
	fwd     *forward.Forwarder
	client  *http.Client
	target  string
	workers sync.WaitGroup
	// settling counts the settlements run off the workers.
	settling    sync.WaitGroup
	settleSlots chan struct{}
}

// Ways a floor forwards (relay's -floor-forward).
const (
	// floorForwardServe forwards through forward.Forwarder with its
	// default client, serve's own forward: the floor then bounds serve
	// with the same machinery on both sides of the store.
	floorForwardServe = "serve"
	// floorForwardNetHTTP forwards through net/http's client, as the
	// non-durable forwarder does (the floors before session 22).
	floorForwardNetHTTP = "net/http"
)

func startRelayFloor(st floorStore, target, via string) (*relayFloor, error) {
	var fwd *forward.Forwarder
	switch via {
	case floorForwardServe:
		var err error
		if fwd, err = forward.New(forward.Config{URL: target, Timeout: 30 * time.Second}); err != nil {
			return nil, err
		}
	case floorForwardNetHTTP:
	default:
		return nil, fmt.Errorf("floor forward %q: want %q or %q", via, floorForwardServe, floorForwardNetHTTP)
	}
	f := &relayFloor{
		fwd:         fwd,
		st:          st,
		queue:       make(chan floorRow, floorQueue),
		settleSlots: make(chan struct{}, floorQueue),
		client:      &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: floorWorkers, DisableCompression: true}},
		target:      target,
	}
	f.adds = &groupcommit.Group[floorRow, bool]{CommitFunc: st.add, Max: floorMaxBatch, Bound: floorCommitBound}
	f.settles = &groupcommit.Group[floorSettle, struct{}]{
		CommitFunc: func(ctx context.Context, rows []floorSettle) ([]struct{}, error) {
			if err := st.settle(ctx, rows); err != nil {
				return nil, err
			}
			return make([]struct{}, len(rows)), nil
		},
		Max: floorMaxBatch, Bound: floorCommitBound,
	}
	for range floorWorkers {
		f.workers.Add(1)
		go f.work()
	}
	srv, err := startRelayServer(http.HandlerFunc(f.serve), relayWebhookPath)
	if err != nil {
		close(f.queue)
		f.workers.Wait()
		return nil, err
	}
	f.relayServer = srv
	return f, nil
}

func (f *relayFloor) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Telegram-Bot-Api-Secret-Token") != relaySecret {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, relayMaxBody))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	_, withChat := f.st.(floorChatStore)
	row, ok := floorParse(body, withChat)
	if !ok {
		http.Error(w, "bad update", http.StatusBadRequest)
		return
	}
	if _, byRow := f.st.(floorRowSettler); byRow {
		row.claim = new(intake.Identity)
	}
	if _, leases := f.st.(floorLeaseStore); leases {
		row.due = new(int64)
	}
	row.claimID = rand.Int64()
	added, err := f.adds.Do(r.Context(), row)
	if err != nil {
		http.Error(w, "not recorded", http.StatusServiceUnavailable)
		return
	}
	if added {
		select {
		case f.queue <- row:
		case <-r.Context().Done():
			// Recorded but not queued: the floor has no sweep to find it
			// again, and the run's timeout reports the lost update.
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// work forwards queued updates and settles each forwarded one.
func (f *relayFloor) work() {
	defer f.workers.Done()
	rs, byRow := f.st.(floorRowSettler)
	_, addOnly := f.st.(floorAddsOnly)
	for row := range f.queue {
		started := time.Now()
		if !f.forward(row) || addOnly {
			continue
		}
		// Off the worker, as serve settles off its handler slot: a
		// settlement waits for its commit, and the next forward need
		// not. At most floorQueue settlements wait at once.
		f.settleSlots <- struct{}{}
		f.settling.Add(1)
		go func() {
			defer func() { <-f.settleSlots; f.settling.Done() }()
			if byRow {
				_ = rs.settleRow(context.Background(), row, started, nil)
				return
			}
			_, _ = f.settles.Do(context.Background(), floorSettle{id: row.id, claimID: row.claimID, started: started, ended: time.Now()})
		}()
	}
}

// floorParse reads an update's id from body, and with withChat its chat
// key too (message.chat.id, the shape the load generators send), for a
// store that keeps it. The bare floors read the id alone.
func floorParse(body []byte, withChat bool) (floorRow, bool) {
	if !withChat {
		var u struct {
			UpdateID int64 `json:"update_id"`
		}
		if json.Unmarshal(body, &u) != nil {
			return floorRow{}, false
		}
		return floorRow{id: u.UpdateID, body: body}, true
	}
	var u struct {
		UpdateID int64 `json:"update_id"`
		Message  *struct {
			Chat struct {
				ID int64 `json:"id"`
			} `json:"chat"`
		} `json:"message"`
	}
	if json.Unmarshal(body, &u) != nil {
		return floorRow{}, false
	}
	row := floorRow{id: u.UpdateID, body: body}
	if u.Message != nil {
		row.chat = floorChat(u.Message.Chat.ID)
	}
	return row, true
}

// forward posts row's update to the target, up to floorForwardTries
// times, and reports whether it was answered 2xx.
func (f *relayFloor) forward(row floorRow) bool {
	if f.fwd != nil {
		u := intake.Update{ID: row.id, Body: row.body}
		a := intake.Attempt{Identity: intake.Identity{UpdateID: row.id, Attempt: 1, ClaimID: strconv.FormatInt(row.claimID, 36)}}
		for range floorForwardTries {
			if f.fwd.Handle(context.Background(), u, a) == nil {
				return true
			}
		}
		return false
	}
	for range floorForwardTries {
		req, err := http.NewRequest(http.MethodPost, f.target, bytes.NewReader(row.body))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := f.client.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return true
		}
	}
	return false
}

func (f *relayFloor) close() {
	f.relayServer.close()
	close(f.queue)
	f.workers.Wait()
	f.settling.Wait()
	f.client.CloseIdleConnections()
	if f.fwd != nil {
		f.fwd.CloseIdleConnections()
	}
	f.st.close()
}

// floorSQLite is the floor's store on SQLite, opened as sqlitestore opens
// its writer: WAL, synchronous=FULL, BEGIN IMMEDIATE, one connection.
type floorSQLite struct {
	db             *sql.DB
	insert, update *sql.Stmt
}

func openFloorSQLite(ctx context.Context, path string) (*floorSQLite, error) {
	db, err := openFloorSQLiteDB(path)
	if err != nil {
		return nil, fmt.Errorf("floor sqlite: %w", err)
	}
	s := &floorSQLite{db: db}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS floor (update_id INTEGER PRIMARY KEY, body TEXT NOT NULL, received_at INTEGER NOT NULL, settled_at INTEGER, answer BLOB)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("floor sqlite: %w", err)
	}
	if s.insert, err = db.PrepareContext(ctx, `INSERT INTO floor (update_id, body, received_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`); err == nil {
		s.update, err = db.PrepareContext(ctx, `UPDATE floor SET settled_at = ?, answer = ? WHERE update_id = ?`)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("floor sqlite: %w", err)
	}
	return s, nil
}

// openFloorSQLiteDB opens the SQLite file at path as sqlitestore opens
// its writer.
func openFloorSQLiteDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	return db, nil
}

func (s *floorSQLite) add(ctx context.Context, rows []floorRow) ([]bool, error) {
	return s.insertEach(ctx, rows, func(r floorRow, now time.Time) []any { return []any{r.id, r.body, now.UnixMilli()} })
}

func (s *floorSQLite) settle(ctx context.Context, rows []floorSettle) error {
	return s.updateEach(ctx, rows, false, func(r floorSettle, now time.Time) []any { return []any{now.UnixMilli(), r.answer, r.id} })
}

// insertEach runs the insert statement once per row, with args's
// arguments, in one transaction, and reports which rows it inserted.
func (s *floorSQLite) insertEach(ctx context.Context, rows []floorRow, args func(floorRow, time.Time) []any) ([]bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	ins := tx.StmtContext(ctx, s.insert)
	now := time.Now()
	added := make([]bool, len(rows))
	for i, r := range rows {
		res, err := ins.ExecContext(ctx, args(r, now)...)
		if err != nil {
			return nil, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		added[i] = n == 1
	}
	return added, tx.Commit()
}

// updateEach runs the update statement once per settlement, with args's
// arguments, in one transaction. With fenced, a settlement that changes
// no row (its claim does not match) fails the batch, as a store would
// refuse that settlement.
func (s *floorSQLite) updateEach(ctx context.Context, rows []floorSettle, fenced bool, args func(floorSettle, time.Time) []any) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	up := tx.StmtContext(ctx, s.update)
	now := time.Now()
	for _, r := range rows {
		res, err := up.ExecContext(ctx, args(r, now)...)
		if err != nil {
			return err
		}
		if !fenced {
			continue
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("update %d: settlement refused (%d rows, %v)", r.id, n, err)
		}
	}
	return tx.Commit()
}

func (s *floorSQLite) count(ctx context.Context) (n int64, err error) {
	return n, s.db.QueryRowContext(ctx, `SELECT count(*) FROM floor`).Scan(&n)
}

func (s *floorSQLite) close() { s.db.Close() }

// floorPostgres is the floor's store on PostgreSQL: one multi-row insert
// and one multi-row update per group commit, synchronous_commit on.
type floorPostgres struct {
	pool *pgxpool.Pool
}

func openFloorPostgres(ctx context.Context, url string) (*floorPostgres, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("floor postgres: %w", err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS floor (update_id bigint PRIMARY KEY, body bytea NOT NULL, received_at timestamptz NOT NULL, settled_at timestamptz)`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("floor postgres: %w", err)
	}
	return &floorPostgres{pool: pool}, nil
}

func (s *floorPostgres) add(ctx context.Context, rows []floorRow) ([]bool, error) {
	ids := make([]int64, len(rows))
	bodies := make([][]byte, len(rows))
	for i, r := range rows {
		ids[i], bodies[i] = r.id, r.body
	}
	got, err := s.pool.Query(ctx, `INSERT INTO floor (update_id, body, received_at)
		SELECT u.id, u.body, now() FROM unnest($1::bigint[], $2::bytea[]) AS u(id, body)
		ON CONFLICT DO NOTHING RETURNING update_id`, ids, bodies)
	if err != nil {
		return nil, err
	}
	return addedRows(rows, got)
}

// addedRows reports which of rows an INSERT … ON CONFLICT DO NOTHING
// RETURNING update_id inserted, from its answer got, which it closes.
func addedRows(rows []floorRow, got pgx.Rows) ([]bool, error) {
	defer got.Close()
	fresh := map[int64]bool{}
	for got.Next() {
		var id int64
		if err := got.Scan(&id); err != nil {
			return nil, err
		}
		fresh[id] = true
	}
	if err := got.Err(); err != nil {
		return nil, err
	}
	added := make([]bool, len(rows))
	for i, r := range rows {
		added[i] = fresh[r.id]
		delete(fresh, r.id) // a repeat within one batch is not new twice
	}
	return added, nil
}

func (s *floorPostgres) settle(ctx context.Context, rows []floorSettle) error {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	_, err := s.pool.Exec(ctx, `UPDATE floor SET settled_at = now() WHERE update_id = ANY($1)`, ids)
	return err
}

func (s *floorPostgres) count(ctx context.Context) (n int64, err error) {
	return n, s.pool.QueryRow(ctx, `SELECT count(*) FROM floor`).Scan(&n)
}

func (s *floorPostgres) close() { s.pool.Close() }

// startRelayFloors starts the floor variants: on SQLite in dir and, with pgURL
// set, on that PostgreSQL database. stop ends them; it is set even on an
// error.
func startRelayFloors(ctx context.Context, dir, pgURL, target, via string) (variants []servedRelay, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	start := func(name, about string, st floorStore) error {
		f, err := startRelayFloor(st, target, via)
		if err != nil {
			st.close()
			return err
		}
		stops = append(stops, f.close)
		variants = append(variants, servedRelay{name: name, about: about, url: f.url})
		return nil
	}
	sq, err := openFloorSQLite(ctx, filepath.Join(dir, "floor.db"))
	if err != nil {
		return nil, stop, err
	}
	if err := start("floor-sqlite", "floor: non-durable + a group-committed SQLite row before the 200 and its settlement after the forward (settings as serve's)", sq); err != nil {
		return nil, stop, err
	}
	if pgURL == "" {
		return variants, stop, nil
	}
	pg, err := openFloorPostgres(ctx, pgURL)
	if err != nil {
		return nil, stop, err
	}
	if err := start("floor-postgres", "floor: as floor-sqlite, on the PostgreSQL serve uses (its own database)", pg); err != nil {
		return nil, stop, err
	}
	return variants, stop, nil
}
