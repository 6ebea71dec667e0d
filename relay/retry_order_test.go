package relay_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
)

// TestRetryOrder: by default a chat's failed update holds the chat's next
// one until its retry succeeds, so the app sees them in order; with
// RetryOutOfOrder the next one is forwarded while the failed one waits
// for its retry (an hour away here). The second update is sent while the
// first one's failing forward is still running, so it is recorded before
// the first one's retry is due.
func TestRetryOrder(t *testing.T) {
	t.Parallel()
	for _, outOfOrder := range []bool{false, true} {
		name := "in line"
		if outOfOrder {
			name = "out of line"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := fakeTelegram(t)
			var (
				mu      sync.Mutex
				seq     []int64 // update ids in the order forwarded
				first   int64   // the update that fails once
				release = make(chan struct{})
			)
			ep := newBotEndpoint(t, func(id int64, n int) (int, string) {
				mu.Lock()
				seq = append(seq, id)
				fails := id == first && n == 1
				mu.Unlock()
				if fails {
					<-release // until the chat's next update is recorded
					return http.StatusInternalServerError, ""
				}
				return http.StatusOK, ""
			})
			closeRelease := sync.OnceFunc(func() { close(release) })
			t.Cleanup(closeRelease) // a failing test must not leave the endpoint blocked
			logs, rec := &testkit.SyncBuffer{}, newRecorder()
			cfg := baseConfig(t, srv, ep, logs, rec)
			cfg.Intake.RetryOutOfOrder = outOfOrder
			if outOfOrder {
				cfg.BackoffBase = time.Hour // the retry will not come during the test
			}
			start(t, cfg)
			u := srv.NewUser("Ada")
			c, err := srv.NewPrivateChat(u)
			if err != nil {
				t.Fatal(err)
			}
			send := func(text string) int64 {
				up, err := srv.SendText(c, u, text)
				if err != nil {
					t.Fatal(err)
				}
				return up.ID
			}
			mu.Lock()
			first = -1
			mu.Unlock()
			one := func() int64 { mu.Lock(); defer mu.Unlock(); first = send("one"); return first }()
			testkit.WaitFor(t, "the first forward", func() bool { return len(ep.hitsOf(one)) == 1 })
			two := send("two")
			testkit.WaitFor(t, "the second update recorded", func() bool { return rec.count(string(relay.KindAccepted)) == 2 })
			closeRelease()
			testkit.WaitFor(t, "the second update forwarded", func() bool { return len(ep.hitsOf(two)) == 1 })
			mu.Lock()
			got := append([]int64(nil), seq...)
			mu.Unlock()
			want := []int64{one, one, two} // failed, retried, then the next
			if outOfOrder {
				want = []int64{one, two} // failed (its retry an hour away), the next
			}
			if len(got) != len(want) {
				t.Fatalf("forwards = %v, want %v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("forwards = %v, want %v", got, want)
				}
			}
		})
	}
}

// TestRetryOutOfOrderContradictsStrictOrder: the two are refused together,
// naming the field.
func TestRetryOutOfOrderContradictsStrictOrder(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), &testkit.SyncBuffer{}, newRecorder())
	cfg.Intake.ChatOrder, cfg.Intake.RetryOutOfOrder = "strict", true
	_, err := relay.New(cfg)
	var ce *relay.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Intake.RetryOutOfOrder" {
		t.Fatalf("New = %v, want a ConfigError naming Intake.RetryOutOfOrder", err)
	}
}
