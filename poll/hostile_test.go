package poll_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/poll"
)

// scripted answers getUpdates from a script, one entry per call, then
// holds the long poll until its context ends, and answers the
// confirmation at once; it records every offset.
type scripted struct {
	mu      sync.Mutex
	script  []func() (json.RawMessage, error)
	offsets []int64
	done    chan struct{} // closed when the script is used up
}

func (s *scripted) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, _ := json.Marshal(params)
	var p struct {
		Offset int64 `json:"offset"`
	}
	_ = json.Unmarshal(b, &p)
	s.mu.Lock()
	s.offsets = append(s.offsets, p.Offset)
	if len(s.script) == 0 {
		s.mu.Unlock()
		select {
		case <-s.done:
			return json.RawMessage(`[]`), nil // the confirmation as Run stops
		default:
			close(s.done)
		}
		<-ctx.Done() // the long poll, until Run stops
		return nil, ctx.Err()
	}
	next := s.script[0]
	s.script = s.script[1:]
	s.mu.Unlock()
	return next()
}

// TestHostileGetUpdates: getUpdates answers with a malformed element among
// updates, a result that is not an array, update ids going backwards, no
// result at all, and a refusal that is not Telegram's JSON. Every update is
// recorded, the offset never moves backwards nor past an update that was
// not recorded, and the poller keeps going (bounded backoff, no stall).
func TestHostileGetUpdates(t *testing.T) {
	t.Parallel()
	raw := func(s string) func() (json.RawMessage, error) {
		return func() (json.RawMessage, error) { return json.RawMessage(s), nil }
	}
	c := &scripted{done: make(chan struct{}), script: []func() (json.RawMessage, error){
		raw(`[{"update_id":5,"message":{"chat":{"id":1}}},"garbage",null,{"update_id":"9"},{"Update_ID":99},{"update_id":6,"message":{"chat":{"id":1}}}]`),
		raw(`{"update_id":7}`),
		raw(`[{"update_id":3,"message":{"chat":{"id":2}}}]`),
		raw(`null`),
		func() (json.RawMessage, error) {
			return nil, errors.New("telegram: getUpdates failed: 502 response was not JSON")
		},
		raw(`[{"update_id":7,"message":{"chat":{"id":1}}}]`),
	}}
	var mu sync.Mutex
	var accepted []int64
	p, err := poll.New(poll.Config{
		Caller: c, Timeout: time.Second, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		AcceptFunc: func(_ context.Context, body []byte) (intake.Acceptance, error) {
			id, err := intake.ParseUpdate(body)
			if err != nil {
				return intake.Invalid, nil
			}
			mu.Lock()
			accepted = append(accepted, id)
			mu.Unlock()
			return intake.Accepted, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the poller stalled before the end of the script")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []int64{3, 5, 6, 7} {
		if !slices.Contains(accepted, id) {
			t.Errorf("update %d was never recorded (recorded %v)", id, accepted)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.IsSorted(c.offsets) {
		t.Errorf("offsets went backwards: %v", c.offsets)
	}
	if want := []int64{0, 7, 7, 7, 7, 7, 8}; !slices.Equal(c.offsets[:min(len(c.offsets), len(want))], want) {
		t.Errorf("offsets = %v; want %v then the confirmation", c.offsets, want)
	}
}
