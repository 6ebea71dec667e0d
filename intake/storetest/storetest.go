// Package storetest checks that an [intake.Store] implementation keeps the
// store contract, in the manner of [testing/fstest.TestFS] and
// golang.org/x/net/nettest.TestConn.
//
// A store author calls [Run] from a test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) intake.Store {
//			return newTestStore(t) // fresh and empty, cleaned up by t
//		})
//	}
//
// Run it with the race detector (go test -race): several cases race claims
// from many goroutines, and a store that is only safe by luck shows there.
//
// Every case is a named subtest that gets a fresh store from the factory. A
// case reports every violation it sees with t.Error and keeps going; a store
// method that returns an error ends that case only. A watchdog fails a case
// that does not finish within [CaseTimeout], so a deadlocked store fails
// instead of hanging the test binary.
//
// The cases follow the store's capabilities: the core cases (Add, Claim,
// Race, Fence, Prune, Exhaust, Batch, ClaimOnAdd, Arguments) run for every
// [intake.Store]; the Process cases only for an [intake.ProcessStore], the
// ChatOrder cases only for an [intake.ChatOrderStore], the Journal cases
// only for an [intake.JournalStore] and the Admin and History cases only
// for an [intake.AdminStore]. Run detects the capabilities once, logs them and the
// cases it skipped.
//
// # Cases
//
// The subtests are grouped by area: Add (one record per update id, also
// under concurrent adds, bodies byte for byte up to 1 MiB, empty and nil
// bodies alone or in a batch, bodies every read
// returns are the caller's to modify, update ids 0, 2^40 and 2^63-1 (a
// cursor at the largest ends a listing), the pending
// grace, a duplicate that changes neither body, receipt time nor chat,
// and, for an [intake.HealthChecker], a store that serves reporting
// itself healthy),
// Claim (live and lapsed leases, a live lease untouched even on its
// last attempt, stale and failed attempts that can no longer settle, the
// base settle refusing a lapsed lease, a settle racing a reclaim, retries
// and spent attempts, a spend that waits for the retry, renewal that never shortens nor revives, millisecond
// boundaries, a Due page that only due rows fill), Race (concurrent claims of a pending row, claims beside
// concurrent listings, and concurrent reclaims of a processing row whose
// lease or owner lapsed: exactly one winner), Fence (the same properties through
// identities, all three identity fields, fresh claim ids), Prune (strict bound,
// rows never pruned, prune then re-add), Exhaust (crash on the last
// attempt, Exhaust, exact acknowledgement once and only of an
// unacknowledged exhaustion, cursor paging that keeps every field and
// whose pages other rows never fill, listings in update id order whatever
// order the rows were exhausted in), Batch (concurrent settlements
// each judged alone, their records kept after the update's earlier ones
// and through a requeue and a later completion, those of attempts that
// already ended refused, rows settled at the settlement's time, not their
// record's end),
// Admin (a completion that clears the row's error text, oldest pending
// measured from when a row became pending, of pending rows only; a requeued row due by its
// receipt; state and unacknowledged filters that select together; a
// search by exactly one chat; processes by id and held rows, each list
// limited apart; List, Search and Replies pages that only the rows and
// entries their filters select fill; and, for a store that is also a
// journal and process store, the inspection reads [RunInspect] checks),
// History (every attempt record kept whole and in order through
// a completion and a requeue, which leaves its mark, its body and header
// values copied on the way in and out, its own times kept when it rides
// on a completion, and pruned with its
// update), Journal (fenced intents, entries listed in key order, hash
// before occurrence,
// replays across attempts, outcomes on their own occurrence, bodies copied
// both ways, concurrent identical intents, deferred outcomes that report
// their own write's result, and the calls of the attempt that completed
// its update, its tail), Process (a lapsed owner's rows taken over before
// their lease ends and fenced, a takeover by no process that leaves no
// owner, heartbeats that never revive, the crash
// budget (a budget of one included), a takeover from a lapsed or reaped owner counted as a crash even
// when the lease lapsed too, a requeue that resets the crashes, Due
// judging owners at its Now), ChatOrder
// (strict chat order: only a chat's lowest unsettled row is claimable and
// listed, never beside a live lease of its chat, settled rows and
// exhaustions release the chat, a row whose owner lapsed is listed and
// taken over, a strict listing judges leases at its Now and keeps the
// pending grace, rows recorded
// through the batch adds keep
// their chat, chat keys of intake.MaxChatKey bytes kept whole, a strict
// listing agrees with strict claims, a listing of one chat whose page
// other chats' rows never fill, a refusal for
// order spends nothing even at the attempt limit, and claims racing the
// late add and claim of an earlier row of their chat lose or win alone),
// ClaimOnAdd (a row recorded claimed is exactly a claimed row under the
// answered identity, whose claim id is fresh even after a prune and re-add,
// and which keeps its receipt time, not its claim's, a duplicate is
// neither recorded nor claimed, an update
// id repeated in one batch is recorded once as its first request asks,
// concurrent claimed adds of one update record it once, a lapsed one is
// reclaimed with attempt 2, mixed and large batches) and Arguments (arguments outside
// the contract are refused with [intake.ErrInvalidArgument] and change
// nothing).
//
// The concurrent cases release their racers together at a barrier and run
// dozens of rounds on fresh rows (the chat order race eight chats at once
// per round), staggering the racers' starts from round to round, so that a
// store whose check and write are two steps fails in every run, not now
// and then: this package's tests run such stores for claims, reclaims,
// strict claims, claimed adds and journal intents.
//
// Times handed to the store are whole milliseconds after a fixed base time
// (a 13-digit Unix millisecond value); violation messages name them as
// offsets such as "50ms".
package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// CaseTimeout is how long one case may run before the watchdog fails it as
// deadlocked. The slowest case (the chat order race) makes about 1,600
// store calls.
const CaseTimeout = time.Minute

// Run checks the store contract against stores made by newStore, one fresh
// store per case, each case a subtest of t. newStore runs on the case's own
// t, so it can use t.TempDir and t.Cleanup; it may call t.Fatal. It is also
// called once up front to detect the capability level.
//
// Cases run one after another, never in parallel: a factory may share one
// database server between stores, and the race cases should contend only with
// themselves.
func Run(t *testing.T, newStore func(t *testing.T) intake.Store) {
	t.Helper()
	probe := newStore(t)
	if probe == nil {
		t.Fatal("storetest: newStore returned a nil store")
	}
	caps := detect(probe)
	plan := planCases(caps)
	t.Log("storetest: " + plan.describe(caps))
	for _, g := range plan.groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.cases {
				t.Run(tc.name, func(t *testing.T) {
					store := newStore(t)
					if store == nil {
						t.Fatal("storetest: newStore returned a nil store")
					}
					runCase(t.Context(), tc, store, caps, func(msg string) { t.Error(msg) })
				})
			}
		})
	}
}

// Check is [Run] for callers without a *testing.T, such as a command that
// checks a database before it is put to use. It runs every case the store's
// level allows, each on a fresh store from newStore, and returns all
// violations joined with [errors.Join] (nil when the store conforms). Each
// violation's message reads "storetest: <group>/<case>: <rule>: <what
// happened>".
//
// Check cannot clean up after newStore; a caller whose stores hold resources
// releases them after Check returns. Cancelling ctx ends the check early:
// the case running reports the cancellation as a store error (if the store
// honours ctx), and each case not yet run reports that it was not run.
func Check(ctx context.Context, newStore func() (intake.Store, error)) error {
	var errs []error
	for _, v := range check(ctx, newStore).violations {
		errs = append(errs, v)
	}
	return errors.Join(errs...)
}

// violation is one broken rule, as Check reports it.
type violation struct {
	caseName string // group/case
	msg      string // "<rule>: <what happened>"
}

func (v violation) Error() string {
	return "storetest: " + v.caseName + ": " + v.msg
}

// checkResult is what a check found, for Check and for this package's tests.
type checkResult struct {
	caps       capabilities
	plan       plan
	violations []violation
}

// check runs the cases; with only set, just those whose group or
// group/case name is listed (this package's tests use it to stay quick).
func check(ctx context.Context, newStore func() (intake.Store, error), only ...string) checkResult {
	probe, err := newStore()
	if err != nil || probe == nil {
		return checkResult{violations: []violation{{caseName: "setup", msg: fmt.Sprintf("newStore failed: store %v, error %v", probe, err)}}}
	}
	res := checkResult{caps: detect(probe)}
	res.plan = planCases(res.caps)
	var mu sync.Mutex
	for _, g := range res.plan.groups {
		for _, tc := range g.cases {
			name := g.name + "/" + tc.name
			if len(only) > 0 && !slices.Contains(only, g.name) && !slices.Contains(only, name) {
				continue
			}
			if err := ctx.Err(); err != nil {
				res.violations = append(res.violations, violation{caseName: name, msg: fmt.Sprintf("not run: %v", err)})
				continue
			}
			report := func(msg string) {
				mu.Lock()
				defer mu.Unlock()
				res.violations = append(res.violations, violation{caseName: name, msg: msg})
			}
			store, err := newStore()
			if err != nil || store == nil {
				report(fmt.Sprintf("newStore failed: store %v, error %v", store, err))
				continue
			}
			runCase(ctx, tc, store, res.caps, report)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return res
}

// runCase runs one case on store under the watchdog. report receives each
// violation, formatted; it may be called from several goroutines.
func runCase(ctx context.Context, tc testCase, store intake.Store, caps capabilities, report func(string)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rep := &reporter{rule: tc.rule, report: report}
	c := newChecker(ctx, store, rep)
	if got := detect(store); got != caps {
		rep.errorf("newStore made stores of different capabilities: this one is %s, the first was %s", got, caps)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.recoverPanic()
		tc.run(c)
	}()
	watchdog := time.NewTimer(CaseTimeout)
	defer watchdog.Stop()
	select {
	case <-done:
	case <-watchdog.C:
		rep.errorf("the case did not finish within %v: the store deadlocked, or a method ignores its ctx", CaseTimeout)
		// The case goroutine may still be blocked in the store; whatever
		// it reports from now on is dropped.
		rep.close()
	}
}

// reporter formats violations of one case's rule and forwards them until the
// case is closed by its watchdog. Safe for concurrent use.
type reporter struct {
	rule   string
	mu     sync.Mutex
	closed bool
	report func(string)
}

func (r *reporter) errorf(format string, args ...any) {
	msg := r.rule + ": " + fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.report(msg)
	}
}

func (r *reporter) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
}

// capabilities is the set of optional capabilities a store implements.
// The core ([intake.Store]) is every store's; a case that needs nothing
// more runs for every store.
type capabilities uint8

const (
	capProcess capabilities = 1 << iota
	capChatOrder
	capJournal
	capAdmin
	capHealth
)

// capabilityNames names each capability's interface, in the order the
// contract lists them.
var capabilityNames = []struct {
	bit  capabilities
	name string
}{
	{capProcess, "intake.ProcessStore"},
	{capChatOrder, "intake.ChatOrderStore"},
	{capJournal, "intake.JournalStore"},
	{capAdmin, "intake.AdminStore"},
	{capHealth, "intake.HealthChecker"},
}

// detect is the one place the suite asserts a store's capabilities.
func detect(s intake.Store) capabilities {
	var c capabilities
	if _, ok := s.(intake.ProcessStore); ok {
		c |= capProcess
	}
	if _, ok := s.(intake.ChatOrderStore); ok {
		c |= capChatOrder
	}
	if _, ok := s.(intake.JournalStore); ok {
		c |= capJournal
	}
	if _, ok := s.(intake.AdminStore); ok {
		c |= capAdmin
	}
	if _, ok := s.(intake.HealthChecker); ok {
		c |= capHealth
	}
	return c
}

func (c capabilities) String() string {
	parts := []string{"core"}
	for _, n := range capabilityNames {
		if c&n.bit != 0 {
			parts = append(parts, strings.TrimPrefix(n.name, "intake."))
		}
	}
	return strings.Join(parts, "+")
}

// missingName names the first interface among needs that caps lacks.
func missingName(needs, caps capabilities) string {
	missing := needs &^ caps
	for _, n := range capabilityNames {
		if missing&n.bit != 0 {
			return n.name
		}
	}
	return "nothing"
}

// testCase is one property of the contract.
type testCase struct {
	name  string       // subtest name
	rule  string       // the rule, as violation messages start
	needs capabilities // zero for the core
	run   func(c *checker)
}

type group struct {
	name  string
	cases []testCase
}

// allGroups lists every case, grouped as the subtests are.
func allGroups() []group {
	return []group{
		{"Add", addCases()},
		{"Claim", claimCases()},
		{"Race", append(raceCases(), reclaimRaceCases()...)},
		{"Fence", fenceCases()},
		{"Prune", pruneCases()},
		{"Exhaust", exhaustCases()},
		{"Batch", batchCases()},
		{"Admin", adminCases()},
		{"History", historyCases()},
		{"Journal", append(journalCases(), journalPromiseCases()...)},
		{"Process", append(processCases(), processPromiseCases()...)},
		{"ChatOrder", append(chatOrderCases(), chatOrderPromiseCases()...)},
		{"ClaimOnAdd", append(claimOnAddCases(), claimOnAddPromiseCases()...)},
		{"Arguments", argumentCases()},
	}
}

// plan is the cases to run for one capability set, and those skipped.
type plan struct {
	groups  []group
	skipped []string // "group/case (needs X)"
}

func planCases(caps capabilities) plan {
	var p plan
	for _, g := range allGroups() {
		run := group{name: g.name}
		var skipped []testCase
		for _, tc := range g.cases {
			if tc.needs&caps == tc.needs {
				run.cases = append(run.cases, tc)
			} else {
				skipped = append(skipped, tc)
			}
		}
		if len(run.cases) > 0 {
			p.groups = append(p.groups, run)
		}
		if len(run.cases) == 0 && len(skipped) > 0 {
			p.skipped = append(p.skipped, fmt.Sprintf("%s (needs %s)", g.name, missingName(skipped[0].needs, caps)))
			continue
		}
		for _, tc := range skipped {
			p.skipped = append(p.skipped, fmt.Sprintf("%s/%s (needs %s)", g.name, tc.name, missingName(tc.needs, caps)))
		}
	}
	return p
}

func (p plan) describe(caps capabilities) string {
	n := 0
	for _, g := range p.groups {
		n += len(g.cases)
	}
	s := fmt.Sprintf("detected %s; running %d cases", caps, n)
	if len(p.skipped) == 0 {
		return s + "; nothing skipped"
	}
	return s + "; skipped: " + strings.Join(p.skipped, ", ")
}

// recoverPanic turns a panic in a case into a violation, so a store that
// panics fails its case instead of the test binary.
func (c *checker) recoverPanic() {
	if v := recover(); v != nil {
		c.rep.errorf("the store panicked: %v\n%s", v, debug.Stack())
	}
}
