package poll_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/poll"
)

// resultCaller answers every getUpdates with a fixed raw result, as a Bot
// API client hands it over.
type resultCaller struct{ result []byte }

func (c resultCaller) Call(context.Context, string, any) (json.RawMessage, error) {
	return json.RawMessage(c.result), nil
}

// FuzzBatch feeds arbitrary getUpdates results through one turn of the
// poller: it never panics, hands every element over (but those of a chat
// after one whose accept failed), and
// moves the offset only past update ids it saw in a batch that was fully
// recorded.
func FuzzBatch(f *testing.F) {
	for _, seed := range []string{
		`[]`,
		`[{"update_id":1,"message":{"text":"hi"}}]`,
		`[{"update_id":5},{"update_id":3},{"update_id":9}]`,
		`[{"no_id":true},{"update_id":2}]`,
		`[1,"x",null,{"update_id":-4}]`,
		`[{"update_id":9223372036854775807}]`,
		`[{"update_id":5,"Update_ID":9},{"update_id":3,"update_id":4},{"update_id":2}]`,
		`{"update_id":1}`,
		`not json`,
		``,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, result []byte, failAccept bool) {
		var mu sync.Mutex
		var handed [][]byte
		accept := func(_ context.Context, body []byte) (intake.Acceptance, error) {
			mu.Lock()
			handed = append(handed, append([]byte(nil), body...))
			mu.Unlock()
			if failAccept {
				return 0, context.DeadlineExceeded
			}
			if _, err := intake.ParseUpdate(body); err != nil {
				return intake.Invalid, nil
			}
			return intake.Accepted, nil
		}
		p, err := poll.New(poll.Config{Caller: resultCaller{result}, AcceptFunc: accept})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Once(context.Background())
		var elems []json.RawMessage
		if json.Unmarshal(result, &elems) != nil || len(elems) > poll.MaxLimit {
			if err == nil {
				t.Fatalf("a result that is not an array of at most %d elements was accepted", poll.MaxLimit)
			}
			if p.Offset() != 0 {
				t.Fatalf("offset moved to %d on a bad result", p.Offset())
			}
			return
		}
		// A failed accept stops its chat's later elements, so then each
		// chat (the elements without a chat key count as one) hands one.
		want := len(elems)
		if failAccept {
			chats := map[string]bool{}
			for _, e := range elems {
				chats[intake.ChatKey(e)] = true
			}
			want = len(chats)
		}
		if len(handed) != want {
			t.Fatalf("handed %d elements, want %d", len(handed), want)
		}
		if failAccept && len(elems) > 0 {
			if err == nil || p.Offset() != 0 {
				t.Fatalf("failed accepts: err %v, offset %d; want an error and the offset kept", err, p.Offset())
			}
			return
		}
		if err != nil {
			t.Fatalf("Once = %v", err)
		}
		// The offset passes exactly the elements intake records, and
		// the id intake records is the one encoding/json reads.
		var next int64
		for _, e := range elems {
			id, err := intake.ParseUpdate(e)
			if err != nil {
				continue
			}
			var head struct {
				UpdateID *int64 `json:"update_id"`
			}
			if json.Unmarshal(e, &head) != nil || head.UpdateID == nil || *head.UpdateID != id {
				t.Fatalf("intake records %s as update %d; encoding/json reads %v", e, id, head.UpdateID)
			}
			next = max(next, id+1)
		}
		if p.Offset() != next {
			t.Fatalf("offset = %d, want %d", p.Offset(), next)
		}
	})
}
