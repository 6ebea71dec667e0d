package intake_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// claimingStore is a memstore that counts claims and
// records what each add asked, with an optional hook on AddBatch.
type claimingStore struct {
	*memstore.Store

	mu       sync.Mutex
	claims   int            // Claim calls
	asked    map[int64]bool // update id → its last add asked for a claim
	renewErr error          // when set, Renew fails with it
	AddFunc  func(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error)
	batches  [][]intake.AddRequest
}

func newClaimingStore() *claimingStore {
	return &claimingStore{Store: memstore.New(), asked: map[int64]bool{}}
}

// holdFirstAdd makes the add of update 1 wait until the returned channel
// is closed; every other add goes straight through.
func (s *claimingStore) holdFirstAdd() chan struct{} {
	hold := make(chan struct{})
	s.AddFunc = func(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
		if reqs[0].UpdateID == 1 {
			<-hold
		}
		return s.Store.AddBatch(ctx, reqs)
	}
	return hold
}

func (s *claimingStore) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	return s.AddBatchAs(ctx, reqs, intake.ProcessClaim{})
}

// AddBatchAs records what each add asked, then adds through AddFunc or
// memstore.
func (s *claimingStore) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	s.mu.Lock()
	for _, rq := range reqs {
		s.asked[rq.UpdateID] = rq.Claim != nil
	}
	s.batches = append(s.batches, slices.Clone(reqs))
	f := s.AddFunc
	s.mu.Unlock()
	if f != nil {
		return f(ctx, reqs)
	}
	return s.Store.AddBatchAs(ctx, reqs, p)
}

func (s *claimingStore) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.ClaimAs(ctx, id, o, intake.ProcessClaim{})
}

// ClaimAs counts the claim and claims through memstore.
func (s *claimingStore) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	s.mu.Lock()
	s.claims++
	s.mu.Unlock()
	return s.Store.ClaimAs(ctx, id, o, p)
}

func (s *claimingStore) Renew(ctx context.Context, id intake.Identity, leaseUntil, now time.Time) (bool, error) {
	s.mu.Lock()
	err := s.renewErr
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	return s.Store.Renew(ctx, id, leaseUntil, now)
}

func (s *claimingStore) claimCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims
}

func (s *claimingStore) askedClaim(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[id]
}

// An update the started runner can take at once is recorded claimed and
// handled under exactly the identity the store persisted, with no claim
// call between the add and the handler; the settlement completes it.
func TestClaimOnAddHandlesUnderThePersistedIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		seen := make(chan intake.Attempt, 1)
		release := make(chan struct{})
		r := newRunner(t, intake.Config{Store: store, AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
			seen <- a
			<-release
			return nil
		}})
		start(t, r)
		mustAccept(t, r, msg(1, 7), intake.Accepted)
		a := <-seen
		if !store.askedClaim(1) {
			t.Fatal("the add of an update the runner could take at once did not ask for a claim")
		}
		if n := store.claimCalls(); n != 0 {
			t.Fatalf("Claim called %d times for an update claimed on add", n)
		}
		got := row(t, store, 1)
		if a.Attempt != 1 || a.ClaimID == "" || got.ClaimID != a.ClaimID || got.Attempts != 1 || got.State != intake.StateProcessing {
			t.Fatalf("handler got %+v; row is %s, attempts %d, claim %q", a.Identity, got.State, got.Attempts, got.ClaimID)
		}
		if ok, err := a.Owns(t.Context()); err != nil || !ok {
			t.Fatalf("Attempt.Owns = %v, %v while the handler runs", ok, err)
		}
		close(release)
		idle(t, r)
		if got := row(t, store, 1); got.State != intake.StateCompleted {
			t.Fatalf("row = %s after the handler returned, want completed", got.State)
		}
	})
}

// A claimed-on-add update that fails is retried under a new claim, not the
// one its add recorded.
func TestClaimOnAddRetryClaimsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		var ids []intake.Identity
		var mu sync.Mutex
		r := newRunner(t, intake.Config{Store: store, AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
			mu.Lock()
			defer mu.Unlock()
			ids = append(ids, a.Identity)
			if len(ids) == 1 {
				return intake.RetryLater(errors.New("not yet"), time.Second)
			}
			return nil
		}})
		start(t, r)
		mustAccept(t, r, msg(1, 7), intake.Accepted)
		time.Sleep(2 * time.Second) // the bubble's clock: the retry is due after 1 s
		idle(t, r)
		mu.Lock()
		defer mu.Unlock()
		if len(ids) != 2 || ids[0].Attempt != 1 || ids[1].Attempt != 2 || ids[0].ClaimID == ids[1].ClaimID {
			t.Fatalf("attempts %+v; want attempt 1 then attempt 2 under a new claim id", ids)
		}
		if n := store.claimCalls(); n != 1 {
			t.Fatalf("Claim called %d times; want 1 (the retry)", n)
		}
	})
}

// While an earlier update of a chat is being accepted unclaimed, a later
// one of the chat is not claimed on add: it must not overtake the earlier
// one. Updates of other chats still are. Here the earlier one goes
// unclaimed because every claim token is taken (one slot, so four tokens,
// held by four updates claimed on add that wait for the busy slot).
func TestClaimOnAddNeverOvertakesItsChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		hold2 := make(chan struct{})
		store.AddFunc = func(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
			for _, rq := range reqs {
				if rq.UpdateID == 2 {
					<-hold2
				}
			}
			return store.Store.AddBatch(ctx, reqs)
		}
		var rec recorder
		busy := make(chan struct{})
		r := newRunner(t, intake.Config{Store: store, MaxConcurrent: 1, Handler: func(ctx context.Context, u intake.Update) error {
			rec.add("%d", u.ID)
			if u.ID == 1 {
				<-busy
			}
			return nil
		}})
		start(t, r)
		mustAccept(t, r, msg(1, 100), intake.Accepted) // chat 100 takes the only slot
		synctest.Wait()
		waiting := []int64{10, 11, 12, 13}
		for _, id := range waiting { // each claimed on add, waiting for the slot with a token
			mustAccept(t, r, msg(id, id*1000), intake.Accepted)
		}
		synctest.Wait()
		var wg sync.WaitGroup
		wg.Go(func() { mustAccept(t, r, msg(2, 200), intake.Accepted) }) // no token: unclaimed; its add waits
		synctest.Wait()
		close(busy) // the slot frees while update 2's add is still in flight
		synctest.Wait()
		wg.Go(func() { mustAccept(t, r, msg(3, 200), intake.Accepted) })
		synctest.Wait()
		close(hold2)
		wg.Wait()
		idle(t, r)
		for _, id := range waiting {
			if !store.askedClaim(id) {
				t.Errorf("update %d, accepted with a token free and the slot busy, was not claimed on add", id)
			}
		}
		if store.askedClaim(2) || store.askedClaim(3) {
			t.Errorf("claims asked: update 2 %v, update 3 %v; want neither (2 found no token, 3 followed 2 in flight)", store.askedClaim(2), store.askedClaim(3))
		}
		got := rec.get()
		if i2, i3 := slices.Index(got, "2"), slices.Index(got, "3"); len(got) != 7 || got[0] != "1" || i2 < 0 || i3 < i2 {
			t.Fatalf("handled %v, want 1 first, all 7, and 2 before 3", got)
		}
		mustAccept(t, r, msg(4, 200), intake.Accepted)
		idle(t, r)
		if !store.askedClaim(4) {
			t.Error("update 4, accepted with its chat idle and a token free, was not claimed on add")
		}
	})
}

// A later update of a chat accepted while the chat's claimed add is in
// flight waits behind it, also when both commit in one batch (whose callers
// then wake in any order): 20 rounds.
func TestClaimOnAddLaterUpdateWaitsBehindReservation(t *testing.T) {
	for round := range 20 {
		synctest.Test(t, func(t *testing.T) {
			store := newClaimingStore()
			hold := store.holdFirstAdd()
			var rec recorder
			r := newRunner(t, intake.Config{Store: store, Handler: func(ctx context.Context, u intake.Update) error {
				rec.add("%d", u.ID)
				return nil
			}})
			start(t, r)
			var wg sync.WaitGroup
			wg.Go(func() { mustAccept(t, r, msg(1, 100), intake.Accepted) }) // chat 100: leads a commit that waits
			synctest.Wait()
			// Chat 200's two updates queue for the next commit, together.
			wg.Go(func() { mustAccept(t, r, msg(2, 200), intake.Accepted) })
			synctest.Wait()
			wg.Go(func() { mustAccept(t, r, msg(3, 200), intake.Accepted) })
			synctest.Wait()
			close(hold)
			wg.Wait()
			idle(t, r)
			if !store.askedClaim(2) || store.askedClaim(3) {
				t.Errorf("round %d: claims asked: update 2 %v, update 3 %v; want only 2", round, store.askedClaim(2), store.askedClaim(3))
			}
			var chat []string
			for _, e := range rec.get() {
				if e != "1" {
					chat = append(chat, e)
				}
			}
			if want := []string{"2", "3"}; !slices.Equal(chat, want) {
				t.Fatalf("round %d: chat 200 handled %v, want %v", round, chat, want)
			}
		})
	}
}

// A duplicate or a failed claimed add releases its line and its slot: with
// one slot, the next update still runs at once.
func TestClaimOnAddReleasesOnDuplicateAndError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		boom := errors.New("disk on fire")
		fail := true
		store.AddFunc = func(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
			if fail && reqs[0].UpdateID == 3 {
				return nil, boom
			}
			return store.Store.AddBatch(ctx, reqs)
		}
		var rec recorder
		r := newRunner(t, intake.Config{Store: store, MaxConcurrent: 1, Handler: func(ctx context.Context, u intake.Update) error {
			rec.add("%d", u.ID)
			return nil
		}})
		start(t, r)
		mustAccept(t, r, msg(1, 100), intake.Accepted)
		idle(t, r)
		mustAccept(t, r, msg(1, 100), intake.Duplicate)
		if _, err := r.Accept(t.Context(), msg(3, 100)); !errors.Is(err, boom) {
			t.Fatalf("Accept with a failing store = %v, want %v", err, boom)
		}
		fail = false
		mustAccept(t, r, msg(2, 100), intake.Accepted)
		idle(t, r)
		if !store.askedClaim(2) {
			t.Error("after a duplicate and a failed add, update 2 was not claimed on add: their reservations leaked")
		}
		if got, want := rec.get(), []string{"1", "2"}; !slices.Equal(got, want) {
			t.Fatalf("handled %v, want %v", got, want)
		}
		if n := store.claimCalls(); n != 0 {
			t.Fatalf("Claim called %d times", n)
		}
	})
}

// Close waits for a claimed add in flight and runs its update: it holds a
// claim, as an attempt in flight does.
func TestClaimOnAddCloseRunsTheClaimedUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		hold := make(chan struct{})
		store.AddFunc = func(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
			<-hold
			return store.Store.AddBatch(ctx, reqs)
		}
		var rec recorder
		r, err := intake.New(intake.Config{Store: store, Handler: func(ctx context.Context, u intake.Update) error {
			rec.add("%d", u.ID)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		start(t, r)
		var wg sync.WaitGroup
		wg.Go(func() { mustAccept(t, r, msg(1, 100), intake.Accepted) })
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- r.Close(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while a claimed add was in flight", err)
		default:
		}
		close(hold)
		wg.Wait()
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		if got := rec.get(); !slices.Equal(got, []string{"1"}) {
			t.Fatalf("handled %v during Close, want [1]", got)
		}
		if got := row(t, store, 1); got.State != intake.StateCompleted {
			t.Fatalf("row = %s, want completed", got.State)
		}
	})
}

// Before Start, Accept records unclaimed; Start's sweep takes the update
// with attempt 1.
func TestClaimOnAddNotBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		var rec recorder
		r := newRunner(t, intake.Config{Store: store, AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
			rec.add("%d/%d", u.ID, a.Attempt)
			return nil
		}})
		mustAccept(t, r, msg(1, 100), intake.Accepted)
		if store.askedClaim(1) {
			t.Fatal("an add before Start asked for a claim")
		}
		if got := row(t, store, 1); got.State != intake.StatePending {
			t.Fatalf("row = %s before Start, want pending", got.State)
		}
		start(t, r)
		idle(t, r)
		if got := rec.get(); !slices.Equal(got, []string{"1/1"}) {
			t.Fatalf("handled %v, want [1/1]", got)
		}
	})
}

// A claimed-on-add update whose process can no longer renew its lease (it
// is as good as dead) is taken over by another runner after the lease,
// with attempt 2 and a new claim id; the first attempt's context ends.
func TestClaimOnAddReclaimedAfterLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		store.renewErr = errors.New("network partition")
		lost := make(chan error, 1)
		first := make(chan intake.Identity, 1)
		finish := make(chan struct{})
		a := newRunner(t, intake.Config{Store: store, LeaseDuration: 10 * time.Second, AttemptHandler: func(ctx context.Context, u intake.Update, at intake.Attempt) error {
			first <- at.Identity
			<-ctx.Done()
			lost <- context.Cause(ctx)
			<-finish // the dead process never gets to settle before the takeover
			return ctx.Err()
		}})
		start(t, a)
		mustAccept(t, a, msg(1, 100), intake.Accepted)
		id1 := <-first
		second := make(chan intake.Identity, 1)
		b := newRunner(t, intake.Config{Store: intake.Store(store.Store), LeaseDuration: 10 * time.Second, SweepInterval: time.Second,
			AttemptHandler: func(ctx context.Context, u intake.Update, at intake.Attempt) error {
				second <- at.Identity
				return nil
			}})
		start(t, b)
		var ole *intake.OwnershipLostError
		if err := <-lost; !errors.As(err, &ole) {
			t.Fatalf("first attempt's context ended with %v, want an ownership loss", err)
		}
		id2 := <-second
		if id1.Attempt != 1 || id2.Attempt != 2 || id2.ClaimID == id1.ClaimID {
			t.Fatalf("attempts %+v then %+v; want 1 then 2 under a new claim id", id1, id2)
		}
		idle(t, b)
		close(finish)
		idle(t, a)
		if got := row(t, store, 1); got.State != intake.StateCompleted || got.ClaimID != id2.ClaimID {
			t.Fatalf("row = %s under claim %q, want completed under %q", got.State, got.ClaimID, id2.ClaimID)
		}
	})
}

// The test stores are what their tests assume: faultStore drives the
// add-then-claim path, claimingStore the claimed add.
func TestTestStoresCapabilities(t *testing.T) {
	t.Parallel()
	claimed := func(s intake.ProcessStore) bool {
		now := time.Now()
		o := intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 1}
		res, err := s.AddBatchAs(t.Context(), []intake.AddRequest{{Incoming: intake.Incoming{UpdateID: 1, Body: msg(1, 1), ReceivedAt: now}, Claim: &o}}, intake.ProcessClaim{})
		if err != nil || len(res) != 1 {
			t.Fatalf("AddBatchAs = %v, %v", res, err)
		}
		return res[0].Claimed()
	}
	if claimed(newFaultStore()) {
		t.Error("faultStore recorded an add claimed; its tests would not drive the add-then-claim path")
	}
	if !claimed(newClaimingStore()) {
		t.Error("claimingStore recorded a claimed add unclaimed")
	}
}

// A claim waiting for a handler slot keeps its lease renewed, and its
// handler runs under it once the slot frees; handlers never exceed
// MaxConcurrent.
func TestClaimWaitsForASlotUnderItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		var mu sync.Mutex
		running, most := 0, 0
		var ids []intake.Identity
		r := newRunner(t, intake.Config{Store: store, MaxConcurrent: 1, LeaseDuration: 10 * time.Second,
			AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
				mu.Lock()
				running++
				most = max(most, running)
				ids = append(ids, a.Identity)
				mu.Unlock()
				if u.ID == 1 {
					time.Sleep(30 * time.Second) // three leases
				}
				mu.Lock()
				running--
				mu.Unlock()
				return nil
			}})
		start(t, r)
		t0 := time.Now()
		mustAccept(t, r, msg(1, 100), intake.Accepted)
		synctest.Wait()                                // update 1's handler holds the only slot
		mustAccept(t, r, msg(2, 200), intake.Accepted) // no slot free: claimed by its line, then waits
		time.Sleep(25 * time.Second)
		got := row(t, store, 2)
		if got.State != intake.StateProcessing || got.Attempts != 1 || !got.DueAt.After(t0.Add(25*time.Second)) {
			t.Fatalf("update 2 waiting for a slot: %s, attempt %d, lease to %v after start; want processing, attempt 1, its lease renewed past 25s",
				got.State, got.Attempts, got.DueAt.Sub(t0))
		}
		idle(t, r)
		mu.Lock()
		defer mu.Unlock()
		if most != 1 {
			t.Errorf("%d handlers ran at once; MaxConcurrent is 1", most)
		}
		if len(ids) != 2 || ids[1].UpdateID != 2 || ids[1].Attempt != 1 || ids[1].ClaimID != got.ClaimID {
			t.Fatalf("attempts %+v; want update 2 run once, under the claim it waited with (%q)", ids, got.ClaimID)
		}
		if got := row(t, store, 2); got.State != intake.StateCompleted {
			t.Fatalf("update 2 = %s, want completed", got.State)
		}
	})
}

// A claimed-on-add update given up is exhausted under the identity its add
// recorded, and the exhaustion is delivered and acknowledged by it.
func TestClaimOnAddExhaustedUnderItsIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		handled := make(chan intake.Identity, 1)
		delivered := make(chan intake.Exhaustion, 1)
		r := newRunner(t, intake.Config{Store: store,
			AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
				handled <- a.Identity
				return intake.Abandon(errors.New("not for us"))
			},
			ExhaustionHandler: func(ctx context.Context, e intake.Exhaustion) error {
				delivered <- e
				return nil
			}})
		start(t, r)
		mustAccept(t, r, msg(1, 100), intake.Accepted)
		id := <-handled
		e := <-delivered
		idle(t, r)
		if !store.askedClaim(1) || e.Identity != id || id.Attempt != 1 {
			t.Fatalf("claimed add handled as %+v, exhausted as %+v; want one identity, attempt 1, claimed on add", id, e.Identity)
		}
		if got := row(t, store, 1); got.State != intake.StateAbandoned || got.SettledAt.IsZero() || got.ClaimID != id.ClaimID {
			t.Fatalf("row = %s, settled %v, claim %q; want an acknowledged exhaustion under %q", got.State, got.SettledAt, got.ClaimID, id.ClaimID)
		}
	})
}
