package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// floorContract is the floor's durable work done through serve's own store
// and its contract instead of a bare table: each update is recorded
// already claimed (AddBatchAs, with serve's lease, attempt ceiling, crash
// budget and process, and the chat key strict order reads), and settled
// completed with its attempt's record (Settle with an Attempt), fenced by
// the identity its add returned. That is every write DESIGN's guarantees
// ask of the store for an update handled once: a claim identity that
// fences the settlement, a lease, the chat and sweep indexes, and the
// attempt's history. Around it runs the floor's machinery, not serve's
// runner: no chat lines, lease timers, per-attempt contexts, events or
// metrics. So serve against this floor is what serve's runner costs, and
// this floor against the bare one is what the guarantees' writes cost.
type floorContract struct {
	st      intake.ProcessStore
	process string
	// pending records rows unclaimed (AddBatch), as an intake that has
	// not started handling does: intake-accept's contract floor.
	pending bool
	release func()
}

// newFloorContractPending is the contract floor of intake-accept over st:
// each update recorded pending with its chat key (AddBatch), as Accept
// records it before any handling starts.
func newFloorContractPending(st intake.Store, release func()) (*floorContract, error) {
	ps, ok := st.(intake.ProcessStore)
	if !ok {
		release()
		return nil, fmt.Errorf("floor store: %T has no process capability", st)
	}
	return &floorContract{st: ps, pending: true, release: release}, nil
}

// newFloorContract registers a process on st, as a runner does when it
// starts, for an hour: the floor keeps no heartbeat.
func newFloorContract(ctx context.Context, st intake.ProcessStore, release func()) (*floorContract, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		release()
		return nil, err
	}
	f := &floorContract{st: st, process: hex.EncodeToString(b[:]), release: release}
	ok, err := st.Register(ctx, f.process, time.Now().Add(time.Hour))
	if err == nil && !ok {
		err = fmt.Errorf("process %s refused", f.process)
	}
	if err != nil {
		release()
		return nil, fmt.Errorf("floor store: register: %w", err)
	}
	return f, nil
}

// openFloorContractSQLite opens sqlitestore on path with serve's defaults.
func openFloorContractSQLite(ctx context.Context, path string) (*floorContract, error) {
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		return nil, fmt.Errorf("floor store sqlite: %w", err)
	}
	return newFloorContract(ctx, st, func() { st.Close() })
}

// openFloorContractPostgres opens pgstore on the database at url, with a
// pool as serve opens it, in a table of its own.
func openFloorContractPostgres(ctx context.Context, url string) (*floorContract, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("floor store postgres: %w", err)
	}
	st, err := pgstore.New(ctx, pool, pgstore.Config{Table: "floor_contract"})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("floor store postgres: %w", err)
	}
	return newFloorContract(ctx, st, pool.Close)
}

func (f *floorContract) add(ctx context.Context, rows []floorRow) ([]bool, error) {
	now := time.Now()
	claim := &intake.ClaimOpts{Now: now, LeaseUntil: now.Add(intake.DefaultLeaseDuration), MaxAttempts: intake.DefaultMaxAttempts}
	if f.pending {
		claim = nil
	}
	reqs := make([]intake.AddRequest, len(rows))
	for i, r := range rows {
		reqs[i] = intake.AddRequest{Incoming: intake.Incoming{UpdateID: r.id, Body: r.body, ReceivedAt: now, Chat: r.chat}, Claim: claim}
	}
	var (
		res []intake.AddResult
		err error
	)
	if f.pending {
		res, err = f.st.AddBatch(ctx, reqs)
	} else {
		res, err = f.st.AddBatchAs(ctx, reqs, intake.ProcessClaim{Process: f.process, MaxCrashes: intake.DefaultMaxCrashes})
	}
	if err != nil {
		return nil, err
	}
	added := make([]bool, len(rows))
	for i, r := range res {
		added[i] = r.Added
		if r.Added && rows[i].claim != nil {
			*rows[i].claim = r.Identity
		}
	}
	return added, nil
}

// settleRow settles row completed at the end of its forward, started at
// started, with the attempt's record, as serve's runner does; the store
// group-commits concurrent settlements itself.
func (f *floorContract) settleRow(ctx context.Context, row floorRow, started time.Time, answer []byte) error {
	now := time.Now()
	ok, err := f.st.Settle(ctx, *row.claim, intake.Settlement{State: intake.StateCompleted, At: now, Attempt: &intake.AttemptRecord{
		Process: f.process, StartedAt: started, EndedAt: now, Outcome: intake.AttemptCompleted, Status: 200, Body: answer,
	}})
	if err == nil && !ok {
		err = fmt.Errorf("update %d: settlement refused", row.id)
	}
	return err
}

func (*floorContract) keepsChat() {}

func (f *floorContract) settle(context.Context, []floorSettle) error {
	return fmt.Errorf("floor store: settles row by row (settleRow)")
}

func (f *floorContract) count(ctx context.Context) (int64, error) {
	admin, ok := f.st.(intake.AdminStore)
	if !ok {
		return 0, fmt.Errorf("floor store: no admin view")
	}
	s, err := admin.Stats(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range s.Count {
		n += int64(c)
	}
	return n, nil
}

func (f *floorContract) close() {
	if !f.pending {
		_, _ = f.st.Leave(context.Background(), f.process)
	}
	f.release()
}

// floorChat is the chat key intake gives an update whose chat is
// message.chat, the shape the load generator sends.
func floorChat(id int64) string { return strconv.FormatInt(id, 10) }
