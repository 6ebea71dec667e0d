package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
)

// TestWaitForTurnIsNotCutByResponseTimeout: a call's hard bound is its
// arrival plus MaxWait plus ResponseTimeout: ResponseTimeout counts from
// the call's turn, so a call that waits for its turn longer than
// ResponseTimeout (here 200 ms; the chat's turn is held 400 ms) is still
// sent when its turn comes, within MaxWait (10 s).
func TestWaitForTurnIsNotCutByResponseTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.ResponseTimeout = 200 * time.Millisecond }})
	held := holdTurn(t, f.lim, f.chat.ID)
	id := f.claim(t, 31)
	answer := goSend(t.Context(), attemptRoot(f.srv.URL, id)+"/bot"+f.tg.Token+"/sendMessage", f.chat.ID, "after a wait")
	waitQueued(t, f.lim, 1)
	stop := time.AfterFunc(400*time.Millisecond, held.Cancel) // the chat's turn comes, later than ResponseTimeout
	t.Cleanup(func() { stop.Stop() })
	if r := receive(t, answer); r.status != http.StatusOK {
		t.Errorf("the call = %d %s; want Telegram's 200 once its turn came", r.status, r.body)
	}
	if n := f.ledger("after a wait"); n != 1 {
		t.Errorf("ledger holds %d messages; want 1", n)
	}
}
