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

// TestOutcomeWritesWait: wait returns at once without a write of its key
// and once that write ended otherwise.
func TestOutcomeWritesWait(t *testing.T) {
	o := newOutcomeWrites(4)
	o.wait(context.Background(), key(1), func() { t.Error("waited without a write in flight") })
	done, _ := o.start(key(1))
	o.wait(context.Background(), key(2), func() { t.Error("waited for another key's write") })
	waiting := make(chan struct{})
	returned := make(chan struct{})
	go func() {
		o.wait(context.Background(), key(1), func() { close(waiting) })
		close(returned)
	}()
	<-waiting
	select {
	case <-returned:
		t.Fatal("wait returned while the write was in flight")
	default:
	}
	done()
	<-returned
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	done, _ = o.start(key(1))
	o.wait(ended, key(1), nil) // returns: the context ended
	done()
}
