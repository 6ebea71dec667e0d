package forward_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
)

// A 200 whose body is a webhook reply an app's buggy serializer broke is
// a reply all the same: it cannot be performed, but it is never dropped
// without a word, with or without a Replier.
func TestMalformedReplyIsReportedNotDropped(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"method":"sendMessage","chat_id":1,"text":"hi",}`,                // a trailing comma
		`{"method":"sendMessage","chat_id":1,"text":"hi"}{"ok":true}`,      // two values
		`[{"method":"sendMessage","chat_id":1,"text":"hi"},]`,              // a trailing comma in an array
		"\ufeff" + `{"method":"sendMessage","chat_id":1,"text":"hi"}`,      // a byte order mark
		`{"method":"sendMessage","chat_id":1,"text":"unterminated string}`, // cut by the app
		`[{"method":"sendMessage","chat_id":1,"text":"hi"}]`,               // our array, without a Replier to perform it
		`{"method":5}`, // no string method
	} {
		for _, withReplier := range []bool{false, true} {
			t.Run(body, func(t *testing.T) {
				t.Parallel()
				app, srv := newEndpoint(t, http.StatusOK, nil)
				app.body = []byte(body)
				var mu sync.Mutex
				var seen []forward.UnactedReply
				cfg := forward.Config{URL: srv.URL, UnactedReplyFunc: func(r forward.UnactedReply) {
					mu.Lock()
					seen = append(seen, r)
					mu.Unlock()
				}}
				rep := &scriptedReplier{status: http.StatusOK, outcome: "answered"} // as Telegram would
				if withReplier {
					cfg.Replier = rep
				}
				f := newForwarder(t, cfg)
				err := f.Handle(t.Context(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt)
				rep.mu.Lock()
				performed := len(rep.methods)
				rep.mu.Unlock()
				if err == nil && performed == 0 && f.UnactedReplies() == 0 {
					t.Fatalf("replier %v: the update completes and its reply %q is dropped without a word", withReplier, body)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(seen) > 0 && (seen[0].UpdateID != 42 || seen[0].Reason == "") {
					t.Errorf("reported %+v", seen[0])
				}
			})
		}
	}
}
