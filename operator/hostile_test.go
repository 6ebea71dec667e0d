package operator_test

import (
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/operator"
)

// TestHostileRetryAfterNeverBlocks: Telegram answers the first alert with a
// 429 whose retry_after is absurd (1e12 s, clamped to a day). Post keeps
// returning at once, Close ends the wait promptly, and every message that
// will not arrive is reported with a reason.
func TestHostileRetryAfterNeverBlocks(t *testing.T) {
	t.Parallel()
	srv := newBotServer(t, refusal(429, "Too Many Requests", `{"retry_after":1e12}`))
	client, _ := newClient(t, srv)
	ch, d := newChannel(t, client, operator.Config{MinInterval: time.Millisecond})
	ch.Post("first", "")
	srv.awaitCall(t, 0)
	posted := make(chan struct{})
	go func() {
		for range 3 {
			ch.Post("later", "")
		}
		close(posted)
	}()
	select {
	case <-posted:
	case <-time.After(5 * time.Second):
		t.Fatal("Post blocked behind Telegram's retry_after")
	}
	closed := make(chan struct{})
	go func() { ch.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the retry_after wait")
	}
	got := d.All()
	if len(got) == 0 {
		t.Fatal("no message was reported dropped")
	}
	texts := map[string]int{}
	for _, x := range got {
		if x.Reason == "" {
			t.Errorf("drop without a reason: %+v", x)
		}
		texts[x.Text]++
	}
	if texts["first"] != 1 {
		t.Errorf("drops = %v; want the first alert reported once", d.Summary())
	}
	if n := len(srv.Calls()); n != 1 {
		t.Errorf("Telegram saw %d calls; want 1 (the wait was never cut short)", n)
	}
}
