package forward_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
)

// scriptedReplier answers every call with one status and outcome, and
// records the calls.
type scriptedReplier struct {
	status   int
	outcome  string
	replayed bool
	cancel   context.CancelFunc // when set, called at the first call
	mu       sync.Mutex
	methods  []string
}

func (r *scriptedReplier) Reply(_ context.Context, _ intake.Identity, method string, _ []byte) (int, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.methods = append(r.methods, method)
	if r.cancel != nil {
		r.cancel()
	}
	return r.status, r.outcome, r.replayed
}

// TestReplyOutcomes: an update whose webhook reply has a known outcome for
// each call (Telegram's answer, an error included, or unknown) completes;
// one whose call was not dispatched, throttled, answered 429, stale or got
// no answer at all fails the attempt, retryably, and stops at that call.
func TestReplyOutcomes(t *testing.T) {
	t.Parallel()
	app, srv := newEndpoint(t, http.StatusOK, nil)
	app.body = []byte(`[{"method":"sendMessage","chat_id":1,"text":"a"},{"method":"sendPhoto","chat_id":1}]`)
	for _, tc := range []struct {
		status   int
		outcome  string
		replayed bool
		complete bool
		cancels  bool // the attempt's context ends during the first call
	}{
		{200, "answered", false, true, false},
		{400, "answered", true, true, false}, // Telegram's refusal is a known outcome
		{502, "unknown", false, true, false},
		{409, "refused", false, true, false},
		{503, "not-dispatched", false, false, false},
		{429, "throttled", false, false, false},
		{503, "throttled", false, false, false}, // the outcome alone says so
		{429, "answered", false, false, false},
		{409, "stale", false, false, false},
		{0, "", false, false, false},
		{200, "answered", false, false, true},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		rep := &scriptedReplier{status: tc.status, outcome: tc.outcome, replayed: tc.replayed}
		if tc.cancels {
			rep.cancel = cancel
		}
		var mu sync.Mutex
		var told []forward.Reply
		f := newForwarder(t, forward.Config{URL: srv.URL, Replier: rep, ReplyFunc: func(r forward.Reply) {
			mu.Lock()
			told = append(told, r)
			mu.Unlock()
		}})
		err := f.Handle(ctx, intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt)
		cancel()
		wantCalls := 2
		if tc.complete {
			if err != nil {
				t.Errorf("%d %q: err = %v, want the update completed", tc.status, tc.outcome, err)
			}
		} else {
			wantCalls = 1
			var re *forward.ReplyError
			var ab *intake.AbandonError
			if !errors.As(err, &re) || errors.As(err, &ab) || re.Method != "sendMessage" {
				t.Errorf("%d %q: err = %v, want a retryable *ReplyError for sendMessage", tc.status, tc.outcome, err)
			}
		}
		mu.Lock()
		if len(rep.methods) != wantCalls || len(told) != wantCalls {
			t.Errorf("%d %q: performed %v, told %d; want %d calls", tc.status, tc.outcome, rep.methods, len(told), wantCalls)
		} else if r := told[0]; r.Method != "sendMessage" || r.UpdateID != 42 || r.Attempt != 2 ||
			r.Status != tc.status || r.Outcome != tc.outcome || r.Replayed != tc.replayed {
			t.Errorf("%d %q: ReplyFunc told %+v", tc.status, tc.outcome, r)
		}
		mu.Unlock()
	}
}
