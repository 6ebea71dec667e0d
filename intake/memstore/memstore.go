// Package memstore is the reference [intake.Store]: every row lives in a map
// in memory, guarded by one mutex.
//
// Like [testing/fstest.MapFS], it is deliberately simple and states its
// limits. Nothing survives a restart: Add reports an update as recorded, the
// intake answers Telegram, and if the process then exits before the update was
// handled, the update is gone. Use it in tests, in examples, and for bots that
// accept losing unhandled updates on a restart. It also serves one process
// only; several processes cannot share it. For anything else use
// sqlitestore or pgstore.
//
// Apart from durability, a [Store] follows the contract of [intake.Store]
// exactly and passes [github.com/tgrelay/tgrelay/intake/storetest.Run]. It
// also implements every optional capability: [intake.ProcessStore],
// [intake.ChatOrderStore], [intake.JournalStore], [intake.AdminStore] and
// [intake.HealthChecker] (always healthy).
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tgrelay/tgrelay/intake"
)

// The capability levels a Store claims, checked at compile time.
var (
	_ intake.Store          = (*Store)(nil)
	_ intake.ProcessStore   = (*Store)(nil)
	_ intake.ChatOrderStore = (*Store)(nil)
	_ intake.JournalStore   = (*Store)(nil)
	_ intake.AdminStore     = (*Store)(nil)
	_ intake.HealthChecker  = (*Store)(nil)
)

// Store keeps update rows in memory. It is safe for concurrent use by many
// goroutines; every method is one step under the store's mutex, so no caller
// ever sees a half-applied transition.
//
// Bodies are copied on the way in and on the way out: a caller can neither
// change a stored body by reusing its slice nor by writing to a returned one.
//
// The zero value is not usable; create a Store with [New].
type Store struct {
	mu   sync.Mutex
	rows map[int64]*row
	// chats holds each chat's rows, by chat key: the rows strict order
	// compares a claim against, without reading every other chat's.
	chats map[string]map[int64]*row
	// procs maps each registered process id to its heartbeat's end.
	procs map[string]time.Time
}

// row is one stored update. settled distinguishes "no settlement time" from
// a settlement at the zero time.
type row struct {
	state      intake.State
	attempts   int
	claimID    string
	owner      string // process id of the latest claim; "" for none
	crashes    int    // claims that took the row over from a lapsed owner
	receivedAt time.Time
	dueAt      time.Time
	settledAt  time.Time
	settled    bool
	err        string
	body       []byte
	chat       string // Incoming.Chat
	// calls is the row's outgoing-call journal (journal.go); it goes with
	// the row when the row is pruned.
	calls map[intake.Call]*intake.JournalEntry
	// history is the row's attempt history (attempts.go); it goes with the
	// row when the row is pruned.
	history []intake.AttemptRecord
}

// New returns an empty Store.
func New() *Store {
	return &Store{rows: make(map[int64]*row), chats: make(map[string]map[int64]*row), procs: make(map[string]time.Time)}
}

// claimableAt reports whether r can be claimed at now: a pending row always,
// a failed row when its retry is due, a processing row when its lease ended
// strictly before now.
func (r *row) claimableAt(now time.Time) bool {
	switch r.state {
	case intake.StatePending:
		return true
	case intake.StateFailed:
		return !r.dueAt.After(now)
	case intake.StateProcessing:
		return r.dueAt.Before(now)
	default:
		return false
	}
}

// liveAt reports whether r is processing under a lease that is live at at
// (lease end >= at).
func (r *row) liveAt(at time.Time) bool {
	return r.state == intake.StateProcessing && !r.dueAt.Before(at)
}

// admits reports whether id may make calls at at (see
// [intake.JournalStore]): it holds the live lease, or it completed the row
// (its tail).
func (r *row) admits(id intake.Identity, at time.Time) bool {
	return r.matches(id) && (r.liveAt(at) || r.state == intake.StateCompleted)
}

// matches reports whether r currently carries exactly this identity.
func (r *row) matches(id intake.Identity) bool {
	return r.attempts == id.Attempt && r.claimID == id.ClaimID
}

// unacknowledged reports whether r is an exhaustion awaiting acknowledgement.
func (r *row) unacknowledged() bool {
	return r.state == intake.StateAbandoned && !r.settled
}

// Add records u as a new pending row and reports true, or reports false when
// the update id is already stored in any state.
func (s *Store) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: add: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(u), nil
}

// AddBatch records each request as [Store.Add] would, all under one lock,
// recording a new row already claimed when its request asks for it; see
// [intake.Store.AddBatch]. Of duplicates within the batch the first wins. An
// invalid claim is an error wrapping [intake.ErrInvalidArgument], and
// nothing is recorded.
func (s *Store) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	return s.addBatch(ctx, "add batch", reqs, intake.ProcessClaim{})
}

// AddBatchAs is [Store.AddBatch] whose claimed rows are taken by process
// p.Process; see [intake.ProcessStore.AddBatchAs].
func (s *Store) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	return s.addBatch(ctx, "add batch as", reqs, p)
}

func (s *Store) addBatch(ctx context.Context, op string, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: %s: %w", op, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: %s: %w", op, err)
	}
	// Validate and generate the claim ids before locking: a failure then
	// changes nothing.
	ids := make([]string, len(reqs))
	for i, rq := range reqs {
		if rq.Claim == nil {
			continue
		}
		if err := rq.Claim.Validate(); err != nil {
			return nil, fmt.Errorf("memstore: %s: %w", op, err)
		}
		id, err := newClaimID()
		if err != nil {
			return nil, fmt.Errorf("memstore: %s: %w", op, err)
		}
		ids[i] = id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]intake.AddResult, len(reqs))
	for i, rq := range reqs {
		if !s.addLocked(rq.Incoming) {
			continue
		}
		out[i].Added = true
		if rq.Claim != nil {
			r := s.rows[rq.UpdateID]
			r.state = intake.StateProcessing
			r.attempts = 1
			r.dueAt = rq.Claim.LeaseUntil
			r.claimID = ids[i]
			r.owner = p.Process
			out[i].Identity = intake.Identity{UpdateID: rq.UpdateID, Attempt: 1, ClaimID: ids[i]}
		}
	}
	return out, nil
}

func (s *Store) addLocked(u intake.Incoming) bool {
	if _, ok := s.rows[u.UpdateID]; ok {
		return false
	}
	r := &row{
		state:      intake.StatePending,
		receivedAt: u.ReceivedAt,
		dueAt:      u.ReceivedAt,
		body:       bytes.Clone(u.Body),
		chat:       u.Chat,
	}
	s.rows[u.UpdateID] = r
	if r.chat != "" {
		c := s.chats[r.chat]
		if c == nil {
			c = make(map[int64]*row)
			s.chats[r.chat] = c
		}
		c[u.UpdateID] = r
	}
	return true
}

// deleteLocked deletes the row id, r, from the store. The caller holds
// s.mu.
func (s *Store) deleteLocked(id int64, r *row) {
	delete(s.rows, id)
	if c := s.chats[r.chat]; c != nil {
		delete(c, id)
		if len(c) == 0 {
			delete(s.chats, r.chat)
		}
	}
}

// inOrderLocked reports whether the row id may be claimed at now under
// strict chat order (see [intake.ChatOrderStore]): its chat is
// empty, or no other row of its chat is unsettled with a lower id, nor
// processing under a lease live at now. The caller holds s.mu.
func (s *Store) inOrderLocked(id int64, r *row, now time.Time) bool {
	if r.chat == "" {
		return true
	}
	for oid, o := range s.chats[r.chat] {
		if oid == id {
			continue
		}
		unsettled := o.state == intake.StatePending || o.state == intake.StateProcessing || o.state == intake.StateFailed
		if (oid < id && unsettled) || o.liveAt(now) {
			return false
		}
	}
	return true
}

// Claim takes the row if it is claimable at opts.Now and returns the
// identity of the claim, with a fresh random (version 4 UUID) claim id; see
// [intake.Store.Claim]. A spent row is exhausted with
// [intake.AttemptsSpentText] instead.
func (s *Store) Claim(ctx context.Context, updateID int64, opts intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.claim(ctx, "claim", updateID, opts, intake.ProcessClaim{}, false)
}

// ClaimAs is [Store.Claim] by process p.Process under its crash budget; see
// [intake.ProcessStore.ClaimAs].
func (s *Store) ClaimAs(ctx context.Context, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	return s.claim(ctx, "claim as", updateID, opts, p, false)
}

// ClaimInOrder is [Store.ClaimAs] under strict chat order; see
// [intake.ChatOrderStore.ClaimInOrder].
func (s *Store) ClaimInOrder(ctx context.Context, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	return s.claim(ctx, "claim in order", updateID, opts, p, true)
}

func (s *Store) claim(ctx context.Context, op string, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim, strict bool) (intake.Identity, bool, error) {
	if err := ctx.Err(); err != nil {
		return intake.Identity{}, false, fmt.Errorf("memstore: %s: %w", op, err)
	}
	if err := opts.Validate(); err != nil {
		return intake.Identity{}, false, fmt.Errorf("memstore: %s: %w", op, err)
	}
	if err := p.Validate(); err != nil {
		return intake.Identity{}, false, fmt.Errorf("memstore: %s: %w", op, err)
	}
	// Generate the id before locking: it needs no state, and a failure then
	// changes nothing.
	claimID, err := newClaimID()
	if err != nil {
		return intake.Identity{}, false, fmt.Errorf("memstore: %s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[updateID]
	if !ok {
		return intake.Identity{}, false, nil
	}
	crashed := s.ownerLapsedLocked(r, opts.Now)
	if !crashed && !r.claimableAt(opts.Now) {
		return intake.Identity{}, false, nil
	}
	if strict && !s.inOrderLocked(updateID, r, opts.Now) {
		return intake.Identity{}, false, nil
	}
	crashes := r.crashes
	if crashed {
		crashes++
	}
	spent, spentText := r.attempts >= opts.MaxAttempts, intake.AttemptsSpentText
	if p.MaxCrashes > 0 {
		// Crashed attempts count against their own budget (ProcessClaim).
		spent = r.attempts-crashes >= opts.MaxAttempts
		if crashes >= p.MaxCrashes {
			spent, spentText = true, intake.CrashesSpentText
		}
	}
	r.crashes = crashes
	if spent {
		// Spend: the row had its attempts (a process may have crashed on
		// the last one) and is exhausted instead of taken.
		r.state = intake.StateAbandoned
		r.dueAt = opts.Now
		r.err = spentText
		r.settled = false
		r.settledAt = time.Time{}
		if r.claimID == "" {
			r.claimID = claimID
		}
		return intake.Identity{}, false, nil
	}
	r.state = intake.StateProcessing
	r.attempts++
	r.dueAt = opts.LeaseUntil
	r.err = ""
	r.claimID = claimID
	r.owner = p.Process
	return intake.Identity{UpdateID: updateID, Attempt: r.attempts, ClaimID: claimID}, true, nil
}

func newClaimID() (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("generate claim id: %w", err)
	}
	return u.String(), nil
}

// Renew extends the live lease id holds to leaseUntil, never shortening
// it; see [intake.Store.Renew].
func (s *Store) Renew(ctx context.Context, id intake.Identity, leaseUntil, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: renew: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id.UpdateID]
	if !ok || !r.matches(id) {
		return false, nil
	}
	return r.renew(leaseUntil, now), nil
}

func (r *row) renew(leaseUntil, now time.Time) bool {
	if !r.liveAt(now) {
		return false
	}
	if leaseUntil.After(r.dueAt) {
		r.dueAt = leaseUntil
	}
	return true
}

// Owns reports whether id holds a live lease at at. In memory there is no
// transaction to join: the answer can be stale as soon as it returns.
func (s *Store) Owns(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: owns: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id.UpdateID]
	return ok && r.matches(id) && r.liveAt(at), nil
}

// Settle ends the attempt id holds while its lease is live at st.At; see
// [intake.Store.Settle]. A settlement state other than completed, failed or
// abandoned is an error wrapping [intake.ErrInvalidArgument].
func (s *Store) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if err := checkSettlement(ctx, "settle", st); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id.UpdateID]
	if !ok || !r.matches(id) || !r.settle(st) {
		return false, nil
	}
	if rec := st.Attempt; rec != nil {
		// The record rides on the settlement (intake.Settlement.Attempt).
		c := cloneRecord(*rec)
		c.UpdateID, c.Attempt, c.ClaimID = id.UpdateID, id.Attempt, id.ClaimID
		r.history = append(r.history, c)
	}
	return true, nil
}

func checkSettlement(ctx context.Context, op string, st intake.Settlement) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	if err := st.Validate(); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	return nil
}

func (r *row) settle(st intake.Settlement) bool {
	if !r.liveAt(st.At) {
		return false
	}
	r.state = st.State
	switch st.State {
	case intake.StateCompleted:
		r.settled, r.settledAt, r.err = true, st.At, ""
	case intake.StateFailed:
		r.dueAt, r.err = st.RetryAt, st.Error
	case intake.StateAbandoned:
		r.settled, r.settledAt, r.err = true, st.At, st.Error
	}
	return true
}

// Due lists, in ascending update id order and at most q.Limit, the pending
// rows received at or before q.PendingBefore and the other rows claimable at
// q.Now. A Limit below 1 is an error wrapping [intake.ErrInvalidArgument].
func (s *Store) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	return s.due(ctx, "due", q, false, "")
}

// DueInOrder is [Store.Due] listing only rows a strict claim could take,
// of chat only when chat is not empty; see
// [intake.ChatOrderStore.DueInOrder].
func (s *Store) DueInOrder(ctx context.Context, q intake.DueQuery, chat string) ([]intake.StoredUpdate, error) {
	return s.due(ctx, "due in order", q, true, chat)
}

func (s *Store) due(ctx context.Context, op string, q intake.DueQuery, strict bool, chat string) ([]intake.StoredUpdate, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: %s: %w", op, err)
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: %s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Under strict order, held marks the chats an unsettled row was already
	// seen of (in id order), live counts their rows under a live lease:
	// inOrderLocked for every row in one pass.
	held := map[string]bool{}
	live := map[string]int{}
	if strict {
		for _, r := range s.rows {
			if r.chat != "" && r.liveAt(q.Now) {
				live[r.chat]++
			}
		}
	}
	var out []intake.StoredUpdate
	for _, id := range s.sortedIDsOfLocked(unsettled) {
		r := s.rows[id]
		due := r.claimableAt(q.Now) || s.ownerLapsedLocked(r, q.Now)
		if r.state == intake.StatePending {
			due = !r.receivedAt.After(q.PendingBefore)
		}
		inOrder := true
		if strict && r.chat != "" {
			self := 0
			if r.liveAt(q.Now) { // a row under a lapsed owner's live lease
				self = 1
			}
			inOrder = !held[r.chat] && live[r.chat]-self == 0
			held[r.chat] = true // every row listed is unsettled
		}
		if !due || !inOrder || (chat != "" && r.chat != chat) {
			continue
		}
		out = append(out, intake.StoredUpdate{UpdateID: id, Body: bytes.Clone(r.body), ReceivedAt: r.receivedAt})
		if len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

// sortedIDsLocked returns every stored update id in ascending order. The
// caller holds s.mu.
func (s *Store) sortedIDsLocked() []int64 { return s.sortedIDsOfLocked(nil) }

// sortedIDsOfLocked returns the ids of the stored updates keep reports
// (every one for nil) in ascending order. Only those are sorted: a sweep
// of a store holding many settled rows sorts its few live ones. The
// caller holds s.mu.
func (s *Store) sortedIDsOfLocked(keep func(*row) bool) []int64 {
	var ids []int64
	if keep == nil {
		ids = make([]int64, 0, len(s.rows))
	}
	for id, r := range s.rows {
		if keep == nil || keep(r) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// unsettled reports whether r is pending, processing or failed: the only
// rows a listing of due updates can return or hold a chat by.
func unsettled(r *row) bool {
	return r.state == intake.StatePending || r.state == intake.StateProcessing || r.state == intake.StateFailed
}

// Prune deletes completed and abandoned rows settled strictly before before
// and reports how many it deleted. Unacknowledged exhaustions stay.
func (s *Store) Prune(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: prune: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, r := range s.rows {
		terminal := r.state == intake.StateCompleted || r.state == intake.StateAbandoned
		if terminal && r.settled && r.settledAt.Before(before) {
			s.deleteLocked(id, r)
			n++
		}
	}
	return n, nil
}

// Exhaust turns the live claim id into an unacknowledged exhaustion; see
// [intake.Store.Exhaust].
func (s *Store) Exhaust(ctx context.Context, id intake.Identity, at time.Time, errText string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: exhaust: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id.UpdateID]
	if !ok || !r.matches(id) || !r.liveAt(at) {
		return false, nil
	}
	r.state = intake.StateAbandoned
	r.dueAt = at
	r.settled, r.settledAt = false, time.Time{}
	r.err = errText
	return true, nil
}

// DueExhaustions lists unacknowledged exhaustions in ascending update id
// order, at most q.Limit, strictly after q.After when set. A Limit below 1 is
// an error wrapping [intake.ErrInvalidArgument].
func (s *Store) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: due exhaustions: %w", err)
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: due exhaustions: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []intake.Exhaustion
	for _, id := range s.sortedIDsOfLocked((*row).unacknowledged) {
		r := s.rows[id]
		if !r.unacknowledged() || (q.After != nil && id <= *q.After) {
			continue
		}
		out = append(out, intake.Exhaustion{
			Identity:    intake.Identity{UpdateID: id, Attempt: r.attempts, ClaimID: r.claimID},
			Body:        bytes.Clone(r.body),
			ExhaustedAt: r.dueAt,
			Error:       r.err,
		})
		if len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

// AcknowledgeExhaustion settles the unacknowledged exhaustion carrying
// exactly id at at, once; see [intake.Store.AcknowledgeExhaustion].
func (s *Store) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: acknowledge exhaustion: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id.UpdateID]
	if !ok || !r.unacknowledged() || !r.matches(id) {
		return false, nil
	}
	r.settled, r.settledAt = true, at
	return true, nil
}

// List returns rows in ascending update id order, filtered by q; see
// [intake.AdminStore.List]. A query that fails [intake.ListQuery.Validate] is
// an error wrapping [intake.ErrInvalidArgument].
func (s *Store) List(ctx context.Context, q intake.ListQuery) ([]intake.Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: list: %w", err)
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: list: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []intake.Row
	for _, id := range s.sortedIDsLocked() {
		r := s.rows[id]
		switch {
		case q.After != nil && id <= *q.After:
			continue
		case q.State != "" && r.state != q.State:
			continue
		case q.Unacknowledged && !r.unacknowledged():
			continue
		}
		out = append(out, r.export(id))
		if len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

func (r *row) export(id int64) intake.Row {
	out := intake.Row{
		UpdateID:   id,
		State:      r.state,
		Attempts:   r.attempts,
		Crashes:    r.crashes,
		ClaimID:    r.claimID,
		ReceivedAt: r.receivedAt,
		DueAt:      r.dueAt,
		Error:      r.err,
		Body:       bytes.Clone(r.body),
	}
	if r.settled {
		out.SettledAt = r.settledAt
	}
	return out
}

// Get returns the row of updateID; ok is false when it is not stored.
func (s *Store) Get(ctx context.Context, updateID int64) (intake.Row, bool, error) {
	if err := ctx.Err(); err != nil {
		return intake.Row{}, false, fmt.Errorf("memstore: get: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[updateID]
	if !ok {
		return intake.Row{}, false, nil
	}
	return r.export(updateID), true, nil
}

// Requeue puts a failed or abandoned row back to pending with zero attempts,
// due at now; see [intake.AdminStore.Requeue]. The last claim id stays on
// the row for the record; the next claim replaces it.
func (s *Store) Requeue(ctx context.Context, updateID int64, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: requeue: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[updateID]
	if !ok || (r.state != intake.StateFailed && r.state != intake.StateAbandoned) {
		return false, nil
	}
	r.requeued(updateID, now) // attempts.go
	r.state = intake.StatePending
	r.attempts = 0
	r.crashes = 0
	r.dueAt = now
	r.err = ""
	r.settled, r.settledAt = false, time.Time{}
	return true, nil
}

// Stats counts rows by state. Count has an entry for each of the five
// states, zero included.
func (s *Store) Stats(ctx context.Context) (intake.Stats, error) {
	if err := ctx.Err(); err != nil {
		return intake.Stats{}, fmt.Errorf("memstore: stats: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := intake.Stats{Count: map[intake.State]int{
		intake.StatePending:    0,
		intake.StateProcessing: 0,
		intake.StateFailed:     0,
		intake.StateCompleted:  0,
		intake.StateAbandoned:  0,
	}}
	for _, r := range s.rows {
		st.Count[r.state]++
		if r.unacknowledged() {
			st.Unacknowledged++
		}
		// A pending row's due time is when it became pending: its receipt
		// or its requeue.
		if r.state == intake.StatePending && (st.OldestPending.IsZero() || r.dueAt.Before(st.OldestPending)) {
			st.OldestPending = r.dueAt
		}
	}
	return st, nil
}

// Health reports nil unless ctx is done: a store in memory can always
// record; see [intake.HealthChecker].
func (s *Store) Health(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: health: %w", err)
	}
	return nil
}
