package gateway_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestRetriesRacingTheirFirstAttempt: for each of many updates, the first
// attempt's call and its retry's identical call race, with the first
// attempt ended at a random moment and Telegram answering after a random
// delay. Whatever the interleaving, the retry is answered 200 (sent, or
// the first attempt's answer replayed, never unknown), both carry the same
// answer when both were answered 200, and a chat gets a message exactly
// once. sendMessage waits for its chat's turn behind the first attempt's
// call; sendChatAction is not limited, so only the gateway's own wait for
// the call in flight keeps its retry from reading the pending intent.
func TestRetriesRacingTheirFirstAttempt(t *testing.T) {
	for _, method := range []string{"sendMessage", "sendChatAction"} {
		t.Run(method, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{tg: telegramtest.Config{Faults: []telegramtest.Fault{
				{Jitter: 20 * time.Millisecond, Times: -1},
			}}})
			path := "/bot" + f.tg.Token + "/" + method
			var wg sync.WaitGroup
			for u := range 30 {
				chat, err := f.tg.NewPrivateChat(f.tg.NewUser(fmt.Sprint("user ", u)))
				if err != nil {
					t.Fatal(err)
				}
				params := map[string]any{"chat_id": chat.ID, "text": "x"}
				if method == "sendChatAction" {
					params = map[string]any{"chat_id": chat.ID, "action": "typing"}
				}
				updateID := int64(100 + u)
				first := f.claim(t, updateID)
				wg.Add(1)
				go func() {
					defer wg.Done()
					got1 := make(chan reply, 1)
					go func() { got1 <- f.post(t, path, &first, params) }()
					time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond) // a random moment, not a synchronisation
					f.fail(t, first)
					second := f.reclaim(t, updateID)
					a2 := f.post(t, path, &second, params)
					a1 := <-got1
					if a2.status != http.StatusOK {
						t.Errorf("update %d: the retry = %d %s (first attempt %d); want 200", updateID, a2.status, a2.body, a1.status)
					}
					if a1.status == http.StatusOK && a2.status == http.StatusOK && !bytes.Equal(a1.env.Result, a2.env.Result) {
						t.Errorf("update %d: both answered 200 with different answers:\n%s\n%s", updateID, a1.body, a2.body)
					}
					if a1.status != http.StatusOK && a1.status != gateway.StatusStale {
						t.Errorf("update %d: the first attempt = %d %s; want 200 or stale", updateID, a1.status, a1.body)
					}
					if method != "sendMessage" {
						return
					}
					n := 0
					for _, m := range f.tg.MessagesTo(chat.ID) {
						if m.Text == "x" {
							n++
						}
					}
					if n != 1 {
						t.Errorf("update %d: the chat got the message %d times; want 1", updateID, n)
					}
				}()
			}
			wg.Wait()
		})
	}
}
