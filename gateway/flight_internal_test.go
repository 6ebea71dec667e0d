package gateway

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// TestGateGivesBackItsTurnWhileAnIdenticalCallIsInFlight: a journaled
// call whose turn comes while an identical call of this gateway holds the
// entry refuses the turn without touching the journal, waits for that
// call outside the limiter, and then records its own intent, holding the
// entry in turn. Past maxFlightWaits it takes the journal's word at once.
func TestGateGivesBackItsTurnWhileAnIdenticalCallIsInFlight(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	waiting := make(chan struct{}, 1)
	g, err := New(Config{Token: "123:abc", Store: st, OwnsIntake: true, Transport: http.DefaultTransport,
		Test: TestHooks{OutcomeWait: func(string) { waiting <- struct{}{} }}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.Add(ctx, intake.Incoming{UpdateID: 7, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := st.Claim(ctx, 7, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 3})
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	call := intake.Call{Method: "deleteMessage", ParamsHash: "h", Occurrence: 1}
	k := outcomeKey{id.UpdateID, call}
	gt := &gate{g: g, ctx: ctx, id: id, method: call.Method, journaled: true, call: call}

	leave, _ := g.flight.take(k) // the identical call, in flight
	if err := gt.run(); !errors.Is(err, errGateRefused) || gt.state != gateBusy {
		t.Fatalf("run while the entry is held = %v, state %v; want refused and busy", err, gt.state)
	}
	if es, err := st.Journal(ctx, 7); err != nil || len(es) != 0 {
		t.Fatalf("journal after a busy turn = %+v, %v; want nothing recorded", es, err)
	}
	done := make(chan error, 1)
	go func() { done <- gt.awaitFlight(ctx) }()
	<-waiting
	leave()
	if err := <-done; err != nil || gt.state != gateWaiting {
		t.Fatalf("awaitFlight = %v, state %v; want nil and waiting", err, gt.state)
	}
	if err := gt.run(); err != nil || gt.state != gateRecorded || gt.leave == nil {
		t.Fatalf("run after the wait = %v, state %v, holds the entry %v; want recorded and held", err, gt.state, gt.leave != nil)
	}
	if l, busy := g.flight.take(k); l != nil || busy == nil {
		t.Fatal("the entry is free while the recorded call holds it")
	}

	// Past maxFlightWaits the call reads the journal: pending, replayed unknown.
	other := &gate{g: g, ctx: ctx, id: id, method: call.Method, journaled: true, call: call, waits: maxFlightWaits}
	if err := other.awaitFlight(ctx); err != nil {
		t.Fatalf("awaitFlight past its bound = %v; want nil at once", err)
	}
	if err := other.run(); !errors.Is(err, errGateRefused) || other.state != gateReplayed || other.leave != nil {
		t.Fatalf("run past the bound = %v, state %v; want the pending entry replayed", err, other.state)
	}
	gt.exitFlight()
	if g.flight.busy(k) != nil {
		t.Fatal("the entry is busy after exitFlight")
	}

	// A wait ends with its context.
	leave, _ = g.flight.take(k)
	defer leave()
	ended, cancel := context.WithCancel(ctx)
	cancel()
	third := &gate{g: g, ctx: ctx, id: id, method: call.Method, journaled: true, call: call}
	if err := third.awaitFlight(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("awaitFlight with an ended context = %v; want context.Canceled", err)
	}
	<-waiting
}
