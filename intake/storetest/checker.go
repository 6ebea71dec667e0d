package storetest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// baseMS is the suite's base time in Unix milliseconds (a 13-digit value,
// as real clocks give). Every time handed to a store is a whole number of
// milliseconds after it.
const baseMS = 1_772_355_600_000

// at returns the time ms milliseconds after the base time.
func at(ms int64) time.Time {
	return time.UnixMilli(baseMS + ms).UTC()
}

// offset names t as milliseconds after the base time, for messages.
func offset(t time.Time) string {
	if t.IsZero() {
		return "zero time"
	}
	return fmt.Sprintf("%dms", t.Sub(at(0)).Milliseconds())
}

// defaultMax is the attempt ceiling of a claim unless a case says otherwise.
const defaultMax = 2

// checker gives a case its store and reports what the case finds. The
// helpers call the store and end the case (like t.Fatal) when a method
// returns an error; they must run on the case's own goroutine. Goroutines a
// case starts call the store directly and report with errorf.
type checker struct {
	ctx   context.Context
	store intake.Store
	// The optional capabilities; each nil without it.
	process intake.ProcessStore
	order   intake.ChatOrderStore
	journal intake.JournalStore
	admin   intake.AdminStore
	rep     *reporter

	mu sync.Mutex
	// claims remembers the identity of every claim the attempt-numbered
	// helpers (claim, renew, settle) took, by update id and attempt, so
	// that a case can name an attempt by its number.
	claims map[attemptKey]intake.Identity
}

// attemptKey names one attempt of one update.
type attemptKey struct {
	updateID int64
	attempt  int
}

func newChecker(ctx context.Context, s intake.Store, rep *reporter) *checker {
	c := &checker{ctx: ctx, store: s, rep: rep, claims: map[attemptKey]intake.Identity{}}
	c.process, _ = s.(intake.ProcessStore)
	c.order, _ = s.(intake.ChatOrderStore)
	c.journal, _ = s.(intake.JournalStore)
	c.admin, _ = s.(intake.AdminStore)
	return c
}

// remember records the identity of a claim for identity.
func (c *checker) remember(id intake.Identity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims[attemptKey{id.UpdateID, id.Attempt}] = id
}

// identity returns the identity of attempt attempt of update id as its
// claim returned it, or, for an attempt never claimed here, an identity
// with a claim id no store generates.
func (c *checker) identity(id int64, attempt int) intake.Identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ident, ok := c.claims[attemptKey{id, attempt}]; ok {
		return ident
	}
	return intake.Identity{UpdateID: id, Attempt: attempt, ClaimID: "storetest-never-claimed"}
}

// errorf records a violation and lets the case go on.
func (c *checker) errorf(format string, args ...any) {
	c.rep.errorf(format, args...)
}

// fatalf records a violation and ends the case. Only the case's goroutine
// may call it.
func (c *checker) fatalf(format string, args ...any) {
	c.rep.errorf(format, args...)
	runtime.Goexit()
}

// failed ends the case when a store method returned an error.
func (c *checker) failed(call string, err error) {
	if err != nil {
		c.fatalf("%s returned an error: %v", call, err)
	}
}

func claimOpts(nowMS, leaseMS int64, max int) intake.ClaimOpts {
	return intake.ClaimOpts{Now: at(nowMS), LeaseUntil: at(leaseMS), MaxAttempts: max}
}

func completed(atMS int64) intake.Settlement {
	return intake.Settlement{State: intake.StateCompleted, At: at(atMS)}
}

func failedAt(atMS, retryMS int64, text string) intake.Settlement {
	return intake.Settlement{State: intake.StateFailed, At: at(atMS), RetryAt: at(retryMS), Error: text}
}

func abandoned(atMS int64, text string) intake.Settlement {
	return intake.Settlement{State: intake.StateAbandoned, At: at(atMS), Error: text}
}

// body is the JSON body the cases store for update id.
func body(id int64) []byte {
	return fmt.Appendf(nil, `{"update_id":%d}`, id)
}

// add records id with its standard body, received at receivedMS.
func (c *checker) add(id int64, receivedMS int64) bool {
	return c.addBody(id, body(id), receivedMS)
}

func (c *checker) addBody(id int64, b []byte, receivedMS int64) bool {
	ok, err := c.store.Add(c.ctx, intake.Incoming{UpdateID: id, Body: b, ReceivedAt: at(receivedMS)})
	c.failed(fmt.Sprintf("Add(%d)", id), err)
	return ok
}

// mustAdd adds a new id and ends the case if the store refuses it.
func (c *checker) mustAdd(id int64, receivedMS int64) {
	if !c.add(id, receivedMS) {
		c.fatalf("Add(%d) of a new update id reported false", id)
	}
}

// claim claims id and returns the attempt number, remembering the
// identity for renew and settle.
func (c *checker) claim(id int64, o intake.ClaimOpts) (int, bool) {
	ident, ok, err := c.store.Claim(c.ctx, id, o)
	c.failed(fmt.Sprintf("Claim(%d, now %s)", id, offset(o.Now)), err)
	if ok {
		c.remember(ident)
	}
	return ident.Attempt, ok
}

// mustClaim claims id and ends the case unless it gets attempt want.
func (c *checker) mustClaim(id int64, o intake.ClaimOpts, want int) {
	attempt, ok := c.claim(id, o)
	if !ok || attempt != want {
		c.fatalf("Claim(%d, now %s) = attempt %d, %v; want attempt %d", id, offset(o.Now), attempt, ok, want)
	}
}

// renew renews attempt attempt of id under the identity its claim returned.
func (c *checker) renew(id int64, attempt int, leaseMS, nowMS int64) bool {
	ok, err := c.store.Renew(c.ctx, c.identity(id, attempt), at(leaseMS), at(nowMS))
	c.failed(fmt.Sprintf("Renew(%d, attempt %d)", id, attempt), err)
	return ok
}

// settle settles attempt attempt of id under the identity its claim
// returned.
func (c *checker) settle(id int64, attempt int, s intake.Settlement) bool {
	ok, err := c.store.Settle(c.ctx, c.identity(id, attempt), s)
	c.failed(fmt.Sprintf("Settle(%d, attempt %d, %s)", id, attempt, s.State), err)
	return ok
}

func (c *checker) due(nowMS, pendingBeforeMS int64, limit int) []intake.StoredUpdate {
	rows, err := c.store.Due(c.ctx, intake.DueQuery{Now: at(nowMS), PendingBefore: at(pendingBeforeMS), Limit: limit})
	c.failed(fmt.Sprintf("Due(now %dms, pending before %dms)", nowMS, pendingBeforeMS), err)
	return rows
}

// dueIDs lists the update ids Due returns.
func (c *checker) dueIDs(nowMS, pendingBeforeMS int64, limit int) []int64 {
	rows := c.due(nowMS, pendingBeforeMS, limit)
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.UpdateID
	}
	return ids
}

func (c *checker) prune(beforeMS int64) int {
	n, err := c.store.Prune(c.ctx, at(beforeMS))
	c.failed(fmt.Sprintf("Prune(before %dms)", beforeMS), err)
	return n
}

func (c *checker) claimOwned(id int64, o intake.ClaimOpts) (intake.Identity, bool) {
	ident, ok, err := c.store.Claim(c.ctx, id, o)
	c.failed(fmt.Sprintf("Claim(%d, now %s)", id, offset(o.Now)), err)
	if ok {
		c.remember(ident)
	}
	return ident, ok
}

// mustClaimOwned claims id and ends the case unless it gets attempt want
// with a claim id.
func (c *checker) mustClaimOwned(id int64, o intake.ClaimOpts, want int) intake.Identity {
	ident, ok := c.claimOwned(id, o)
	if !ok || ident.Attempt != want || ident.UpdateID != id || ident.ClaimID == "" {
		c.fatalf("Claim(%d, now %s) = %s, %v; want attempt %d of update %d with a claim id", id, offset(o.Now), fmtID(ident), ok, want, id)
	}
	return ident
}

func (c *checker) renewOwned(id intake.Identity, leaseMS, nowMS int64) bool {
	ok, err := c.store.Renew(c.ctx, id, at(leaseMS), at(nowMS))
	c.failed(fmt.Sprintf("Renew(%s)", fmtID(id)), err)
	return ok
}

func (c *checker) owns(id intake.Identity, atMS int64) bool {
	ok, err := c.store.Owns(c.ctx, id, at(atMS))
	c.failed(fmt.Sprintf("Owns(%s, at %dms)", fmtID(id), atMS), err)
	return ok
}

func (c *checker) settleOwned(id intake.Identity, s intake.Settlement) bool {
	ok, err := c.store.Settle(c.ctx, id, s)
	c.failed(fmt.Sprintf("Settle(%s, %s)", fmtID(id), s.State), err)
	return ok
}

func (c *checker) exhaust(id intake.Identity, atMS int64, text string) bool {
	ok, err := c.store.Exhaust(c.ctx, id, at(atMS), text)
	c.failed(fmt.Sprintf("Exhaust(%s, at %dms)", fmtID(id), atMS), err)
	return ok
}

func (c *checker) dueExhaustions(limit int, after *int64) []intake.Exhaustion {
	rows, err := c.store.DueExhaustions(c.ctx, intake.ExhaustionQuery{Limit: limit, After: after})
	c.failed(fmt.Sprintf("DueExhaustions(limit %d, after %s)", limit, fmtAfter(after)), err)
	return rows
}

func (c *checker) ack(id intake.Identity, atMS int64) bool {
	ok, err := c.store.AcknowledgeExhaustion(c.ctx, id, at(atMS))
	c.failed(fmt.Sprintf("AcknowledgeExhaustion(%s, at %dms)", fmtID(id), atMS), err)
	return ok
}

// findExhaustion returns the unacknowledged exhaustion of id, if listed on
// the first page of up to 1000.
func (c *checker) findExhaustion(id int64) (intake.Exhaustion, bool) {
	for _, e := range c.dueExhaustions(1000, nil) {
		if e.UpdateID == id {
			return e, true
		}
	}
	return intake.Exhaustion{}, false
}

func (c *checker) get(id int64) (intake.Row, bool) {
	row, ok, err := c.admin.Get(c.ctx, id)
	c.failed(fmt.Sprintf("Get(%d)", id), err)
	return row, ok
}

func fmtID(id intake.Identity) string {
	return fmt.Sprintf("{update %d, attempt %d, claim %q}", id.UpdateID, id.Attempt, id.ClaimID)
}

func fmtAfter(after *int64) string {
	if after == nil {
		return "nil"
	}
	return fmt.Sprint(*after)
}

func ptr(v int64) *int64 { return &v }

// wrongClaim returns id with a claim id no store generates.
func wrongClaim(id intake.Identity) intake.Identity {
	id.ClaimID = "storetest-wrong-" + id.ClaimID
	return id
}

// wrongAttempt returns id naming another attempt of its update, with the
// live claim's id: an identity no claim made, which every fenced call
// must refuse, though its claim id alone would match.
func wrongAttempt(id intake.Identity) intake.Identity {
	id.Attempt++
	return id
}
