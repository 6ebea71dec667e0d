package gateway

import (
	"context"
	"errors"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
)

func key(n int) outcomeKey {
	return outcomeKey{updateID: 1, call: intake.Call{Method: "sendMessage", ParamsHash: "h", Occurrence: n}}
}

// TestOutcomeWritesBound: start refuses past the bound, for a key already
// being written and after shutdown, so those outcomes are written before
// their answers.
func TestOutcomeWritesBound(t *testing.T) {
	o := newOutcomeWrites(2)
	done1, ok := o.start(key(1))
	if !ok {
		t.Fatal("the first write was refused")
	}
	if _, ok := o.start(key(1)); ok {
		t.Error("a second write of a key being written was accepted")
	}
	done2, ok := o.start(key(2))
	if !ok {
		t.Fatal("the second write was refused below the bound")
	}
	if _, ok := o.start(key(3)); ok {
		t.Error("a write past the bound was accepted")
	}
	if n := o.pending(); n != 2 {
		t.Errorf("pending = %d; want 2", n)
	}
	done1()
	done3, ok := o.start(key(3))
	if !ok {
		t.Error("a write was refused after one ended")
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.shutdown(ended); !errors.Is(err, ErrOutcomesPending) {
		t.Errorf("shutdown with writes in flight and an ended context = %v", err)
	}
	if _, ok := o.start(key(4)); ok {
		t.Error("a write was accepted after shutdown")
	}
	done2()
	done3()
	if err := o.shutdown(context.Background()); err != nil {
		t.Errorf("shutdown with nothing in flight = %v", err)
	}
}

// TestHolds: one holder per key at a time; another taker sees the key
// busy until the holder gives it back, and waitFlight returns then, or
// when its context ends; all lists what is held.
func TestHolds(t *testing.T) {
	var h holds[outcomeKey]
	if ch := h.busy(key(1)); ch != nil || h.len() != 0 {
		t.Fatal("a key nobody took is busy")
	}
	leave, busy := h.take(key(1))
	if leave == nil || busy != nil {
		t.Fatalf("taking a free key: leave %v, busy %v", leave != nil, busy)
	}
	if l, b := h.take(key(2)); l == nil || b != nil {
		t.Fatal("another key is busy")
	} else if h.len() != 2 || len(h.all()) != 2 {
		t.Fatalf("len %d, all %d with two keys held", h.len(), len(h.all()))
	} else {
		l()
	}
	l2, ch := h.take(key(1))
	if l2 != nil || ch == nil || h.busy(key(1)) != ch {
		t.Fatalf("taking a held key: leave %v, busy %v", l2 != nil, ch)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if waitFlight(ended, ch, nil) {
		t.Fatal("waitFlight reported the holder done when only the context had ended")
	}
	waiting := make(chan struct{})
	returned := make(chan bool)
	go func() { returned <- waitFlight(context.Background(), ch, func() { close(waiting) }) }()
	<-waiting
	select {
	case <-returned:
		t.Fatal("waitFlight returned while the key was held")
	default:
	}
	leave()
	if !<-returned {
		t.Fatal("waitFlight reported false after the key was given back")
	}
	if h.busy(key(1)) != nil || h.len() != 0 {
		t.Fatal("a key is busy after it was given back")
	}
	if l, b := h.take(key(1)); l == nil || b != nil {
		t.Fatal("the key cannot be taken after it was given back")
	}
}
