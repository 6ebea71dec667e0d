package poll_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/poll"
)

// TestBatchKeepsChatOrder: several updates of one chat in one getUpdates
// answer are accepted one at a time, in update_id order, and a started
// runner handles them in that order; another chat's update is accepted
// beside them. The first update of the busy chat waits in its accept until
// the other chat's accept has begun, so a poller that accepts a chat's
// updates concurrently has them all in flight at once.
func TestBatchKeepsChatOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sent := b.send(t, 6)
	bob := b.srv.NewUser("Bob")
	bobChat, err := b.srv.NewPrivateChat(bob)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.srv.SendText(bobChat, bob, "hi")
	if err != nil {
		t.Fatal(err)
	}
	busy, quiet := intake.ChatKey(sent[0].JSON), intake.ChatKey(other.JSON)
	if busy == "" || quiet == "" || busy == quiet {
		t.Fatalf("chat keys %q and %q; want two distinct keys", busy, quiet)
	}

	var (
		mu       sync.Mutex
		handled  = map[string][]int64{}
		inFlight = map[string]int{}
		accepted = map[string][]int64{}
		overlaps []int64
	)
	r, err := intake.New(intake.Config{Store: b.store, Handler: func(_ context.Context, u intake.Update) error {
		mu.Lock()
		defer mu.Unlock()
		k := intake.ChatKey(u.Body)
		handled[k] = append(handled[k], u.ID)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(ctx)
	})

	quietBegan := make(chan struct{})
	accept := func(ctx context.Context, body []byte) (intake.Acceptance, error) {
		k := intake.ChatKey(body)
		id, _ := intake.ParseUpdate(body)
		mu.Lock()
		if inFlight[k] > 0 {
			overlaps = append(overlaps, id)
		}
		inFlight[k]++
		accepted[k] = append(accepted[k], id)
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[k]--
			mu.Unlock()
		}()
		switch {
		case k == quiet:
			close(quietBegan)
		case id == sent[0].ID:
			select {
			case <-quietBegan:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return r.Accept(ctx, body)
	}
	p, err := poll.New(poll.Config{Caller: b.client, AcceptFunc: accept, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Once(t.Context()); err != nil {
		t.Fatalf("Once = %v", err)
	}
	if err := r.Idle(t.Context()); err != nil {
		t.Fatal(err)
	}

	want := make([]int64, len(sent))
	for i, u := range sent {
		want[i] = u.ID
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) != 0 {
		t.Errorf("updates %v of one chat were accepted while another of the chat was being accepted; want one at a time", overlaps)
	}
	if got := accepted[busy]; !slices.Equal(got, want) {
		t.Errorf("the busy chat's updates were accepted in the order %v; want %v", got, want)
	}
	if got := handled[busy]; !slices.Equal(got, want) {
		t.Errorf("the busy chat's updates were handled in the order %v; want %v", got, want)
	}
	if got := handled[quiet]; !slices.Equal(got, []int64{other.ID}) {
		t.Errorf("the other chat's updates handled: %v; want [%d]", got, other.ID)
	}
}

// TestFailedAcceptStopsItsChat: when an update cannot be recorded, the
// later updates of its chat are not accepted before it (they would run
// first); the batch comes back and is then recorded in order.
func TestFailedAcceptStopsItsChat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sent := b.send(t, 4)
	var (
		mu       sync.Mutex
		accepted []int64
		failOnce = true
	)
	accept := func(ctx context.Context, body []byte) (intake.Acceptance, error) {
		id, _ := intake.ParseUpdate(body)
		mu.Lock()
		fail := failOnce && id == sent[1].ID
		if fail {
			failOnce = false
		}
		accepted = append(accepted, id)
		mu.Unlock()
		if fail {
			return 0, errInjected
		}
		return b.runner.Accept(ctx, body)
	}
	p, err := poll.New(poll.Config{Caller: b.client, AcceptFunc: accept, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Once(t.Context()); err == nil {
		t.Fatal("Once with a failing accept = nil; want the accept's error")
	}
	mu.Lock()
	if want := []int64{sent[0].ID, sent[1].ID}; !slices.Equal(accepted, want) {
		t.Errorf("accepted %v before the failure was returned; want %v (nothing of the chat after the failed update)", accepted, want)
	}
	accepted = nil
	mu.Unlock()
	if err := p.Once(t.Context()); err != nil {
		t.Fatalf("the second Once = %v", err)
	}
	want := make([]int64, len(sent))
	for i, u := range sent {
		want[i] = u.ID
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(accepted, want) {
		t.Errorf("the batch came back and was accepted as %v; want %v", accepted, want)
	}
	if n := b.count(t); n != len(sent) {
		t.Errorf("%d rows recorded; want %d", n, len(sent))
	}
}
