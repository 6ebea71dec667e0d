package pgstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
)

// doubleWins races, in rounds, a strict claim of a chat's pending update
// id+1 against the add and strict claim of its earlier update id, on two
// stores (two processes' worth of connections) over one table, and counts
// the rounds in which both claims won.
func doubleWins(t *testing.T, a, b *pgstore.Store, rounds int) int {
	t.Helper()
	strict := claimOpts(10, 100)
	wins := 0
	for round := range rounds {
		id := int64(10 + 2*round)
		chat := fmt.Sprintf("chat-%d", round)
		if ok, err := b.Add(t.Context(), intake.Incoming{UpdateID: id + 1, Body: []byte(`{}`), ReceivedAt: at(0), Chat: chat}); err != nil || !ok {
			t.Fatalf("Add(%d) = %v, %v", id+1, ok, err)
		}
		var won atomic.Int32
		var ready, wg sync.WaitGroup
		start := make(chan struct{})
		ready.Add(2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			if ok, err := a.Add(t.Context(), intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: at(5), Chat: chat}); err != nil || !ok {
				t.Errorf("Add(%d) = %v, %v", id, ok, err)
				return
			}
			if _, ok, err := a.ClaimInOrder(t.Context(), id, strict, intake.ProcessClaim{}); err != nil {
				t.Error(err)
			} else if ok {
				won.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			if _, ok, err := b.ClaimInOrder(t.Context(), id+1, strict, intake.ProcessClaim{}); err != nil {
				t.Error(err)
			} else if ok {
				won.Add(1)
			}
		}()
		ready.Wait()
		close(start)
		wg.Wait()
		switch won.Load() {
		case 2:
			wins++
		case 0:
			t.Errorf("round %d: neither claim of chat %s won; one must", round, chat)
		}
	}
	return wins
}

// TestStrictClaimsOfOneChatAreSerialised shows the chat lock doing its job
// under READ COMMITTED: with it, of a later update's claim and an earlier
// update's add and claim, never both win; without it (the same statements,
// the lock dropped) both do now and then.
func TestStrictClaimsOfOneChatAreSerialised(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	table := uniqueTable()
	open := func() *pgstore.Store {
		st, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: table})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return st
	}
	a, b := open(), open()
	if n := doubleWins(t, a, b, 300); n != 0 {
		t.Errorf("with the chat lock, both strict claims of one chat won in %d of 300 rounds; never both may", n)
	}
	// The same race without the lock: the suite's race must be able to see
	// it, or passing it proves nothing.
	pool2 := newPool(t)
	table2 := uniqueTable()
	var unlocked []*pgstore.Store
	for range 2 {
		st, err := pgstore.New(t.Context(), pool2, pgstore.Config{Table: table2})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		pgstore.DropChatLock(st)
		unlocked = append(unlocked, st)
	}
	if n := doubleWins(t, unlocked[0], unlocked[1], 900); n == 0 {
		t.Errorf("without the chat lock, no round of 900 let both strict claims of one chat win: the race is not exercised")
	} else {
		t.Logf("without the chat lock, both claims won in %d rounds", n)
	}
}
