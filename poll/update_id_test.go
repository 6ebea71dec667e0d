package poll_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/poll"
)

type fixedCaller struct{ result string }

func (c fixedCaller) Call(context.Context, string, any) (json.RawMessage, error) {
	return json.RawMessage(c.result), nil
}

// The offset poll confirms must follow the update_ids intake records (an
// exact, case-sensitive "update_id", held once in any letter case), never
// a key that only encoding/json's case-insensitive matching sees:
// otherwise the offset jumps past updates Telegram has not handed out yet,
// and they are lost. An element whose id intake refuses as ambiguous
// (update_id held twice in some letter case) moves the offset nowhere,
// like any element that is not an update: which of its ids is Telegram's
// cannot be told.
func TestOffsetFollowsRecordedUpdateID(t *testing.T) {
	for _, tc := range []struct {
		name, batch string
		want        int64
	}{
		{"shadowing key", `[{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":7,"type":"private"}},"Update_ID":1000000}]`, 0},
		{"shadowing key before an update", `[{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":7,"type":"private"}},"Update_ID":1000000},{"update_id":6,"message":{"message_id":2,"date":1,"chat":{"id":7,"type":"private"}}}]`, 7},
		{"only folded key", `[{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":7,"type":"private"}}},{"UPDATE_ID":1000000,"message":{"message_id":2,"date":1,"chat":{"id":8,"type":"private"}}}]`, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var recorded []int64
			p, err := poll.New(poll.Config{
				Caller: fixedCaller{tc.batch},
				AcceptFunc: func(_ context.Context, body []byte) (intake.Acceptance, error) {
					id, err := intake.ParseUpdate(body)
					if err != nil {
						return intake.Invalid, nil
					}
					mu.Lock()
					recorded = append(recorded, id)
					mu.Unlock()
					return intake.Accepted, nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Once(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := p.Offset(); got != tc.want {
				t.Errorf("offset %d after recording update_ids %v; want %d (Telegram would forget every update below %d unseen)", got, recorded, tc.want, got)
			}
		})
	}
}
