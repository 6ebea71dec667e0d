package intake_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// Port of reference test 4: accept answers before a slow update finishes,
// keeps chat order, and runs other chats alongside.
func TestAcceptAnswersBeforeSlowHandlerKeepsChatOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		release := make(chan struct{})
		r := newRunner(t, intake.Config{
			Store: memstore.New(),
			Handler: func(ctx context.Context, u intake.Update) error {
				if u.ID == 1 {
					rec.add("slow start")
					<-release
					rec.add("slow end")
					return nil
				}
				rec.add("handled %d", u.ID)
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 100), intake.Accepted)
		mustAccept(t, r, msg(2, 100), intake.Accepted) // same chat: waits for 1
		mustAccept(t, r, msg(3, 200), intake.Accepted) // other chat: runs now
		mustAccept(t, r, msg(1, 100), intake.Duplicate)
		mustAccept(t, r, []byte(`{"message":{}}`), intake.Invalid)
		mustAccept(t, r, []byte(`not json`), intake.Invalid)
		synctest.Wait()
		before := rec.get()
		close(release)
		slices.Sort(before)
		if want := []string{"handled 3", "slow start"}; !slices.Equal(before, want) {
			t.Fatalf("before release: events %q, want %q", before, want)
		}
		idle(t, r)
		if got, want := rec.get()[2:], []string{"slow end", "handled 2"}; !slices.Equal(got, want) {
			t.Fatalf("events after release %q, want %q", got, want)
		}
	})
}

// Port of reference test 9: what was recorded before Start is handled at
// Start, not before.
func TestRecordedBeforeStartIsHandledAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		r := newRunner(t, intake.Config{
			Store:   memstore.New(),
			Handler: func(ctx context.Context, u intake.Update) error { rec.add("handled %d", u.ID); return nil },
		})
		mustAccept(t, r, msg(7, 1), intake.Accepted)
		synctest.Wait()
		if got := rec.get(); len(got) != 0 {
			t.Fatalf("handled before Start: %q", got)
		}
		start(t, r)
		idle(t, r)
		if got, want := rec.get(), []string{"handled 7"}; !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}

// A handler gets the raw stored bytes and can decode them.
func TestHandlerReceivesRawBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := []byte(`{"update_id": 5 ,  "message":{"chat":{"id":9},"text":"é"}}`)
		got := make(chan intake.Update, 1)
		r := newRunner(t, intake.Config{
			Store:   memstore.New(),
			Handler: func(ctx context.Context, u intake.Update) error { got <- u; return nil },
		})
		start(t, r)
		mustAccept(t, r, body, intake.Accepted)
		u := <-got
		if u.ID != 5 || string(u.Body) != string(body) {
			t.Fatalf("update = %d %q, want 5 %q", u.ID, u.Body, body)
		}
		var v struct {
			Message struct{ Text string } `json:"message"`
		}
		if err := u.Decode(&v); err != nil || v.Message.Text != "é" {
			t.Fatalf("Decode = %v, %+v", err, v)
		}
	})
}

var errBoom = errors.New("boom")

// Accept does not keep the caller's slice: reusing it changes nothing.
func TestAcceptDoesNotRetainBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan string, 1)
		release := make(chan struct{})
		r := newRunner(t, intake.Config{
			Store: memstore.New(),
			Handler: func(_ context.Context, u intake.Update) error {
				<-release
				got <- string(u.Body)
				return nil
			},
		})
		start(t, r)
		buf := msg(1, 1)
		want := string(buf)
		mustAccept(t, r, buf, intake.Accepted)
		for i := range buf {
			buf[i] = 'x'
		}
		close(release)
		if body := <-got; body != want {
			t.Fatalf("handler saw %q, want %q", body, want)
		}
	})
}

// Sweep works without Start: it hands what is due to the handlers, Idle
// waits for them and Close ends the lifecycle.
func TestSweepWithoutStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		var handled []int64
		r, err := intake.New(intake.Config{
			Store:   store,
			Handler: func(_ context.Context, u intake.Update) error { handled = append(handled, u.ID); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		if n := sweep(t, r); n != 0 {
			t.Fatalf("sweep within the pending grace scheduled %d", n)
		}
		time.Sleep(intake.DefaultPendingGrace)
		if n := sweep(t, r); n != 1 {
			t.Fatalf("sweep after the grace scheduled %d, want 1", n)
		}
		idle(t, r)
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(handled) != 1 || row(t, store, 1).State != intake.StateCompleted {
			t.Fatalf("handled %v, want [1] completed", handled)
		}
		mustAccept(t, r, msg(2, 1), intake.Accepted) // not started: recorded only
		synctest.Wait()
		if len(handled) != 1 {
			t.Fatalf("an Accept without Start was handled")
		}
	})
}
