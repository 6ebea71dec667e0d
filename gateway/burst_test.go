package gateway_test

import (
	"fmt"
	"sync"
	"testing"
)

// TestBurstToOneChatNoAppFacing429: a burst of replies to one chat, with
// Telegram's limits on in telegramtest, reaches the app as answers, never
// as a 429: the limiter waits its turn for each.
func TestBurstToOneChatNoAppFacing429(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const n = 5
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() { statuses[i] = f.send(t, nil, fmt.Sprint("burst ", i)).status })
	}
	wg.Wait()
	for i, s := range statuses {
		if s != 200 {
			t.Errorf("reply %d answered %d; want 200 (no 429 at the app)", i, s)
		}
	}
	if got := len(f.tg.MessagesTo(f.chat.ID)); got != n {
		t.Errorf("the chat got %d messages; want %d", got, n)
	}
}
