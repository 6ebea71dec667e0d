package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/closedport"
)

// TestNotDispatchedSaysRetryAfter: the 503 of a call that never left
// carries parameters.retry_after (1 s), as Telegram's own retryable
// refusals do, so a library that retries on it sends the call again:
// safe, since nothing left.
func TestNotDispatchedSaysRetryAfter(t *testing.T) {
	t.Parallel()
	root := "http://" + closedport.Addr(t)
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.APIRoot = root; c.MaxSendTries = 1 }})
	fenced := f.claim(t, 30)
	for name, id := range map[string]*intake.Identity{"unfenced": nil, "fenced": &fenced} {
		r := f.send(t, id, "later")
		var env struct {
			Parameters struct {
				RetryAfter int `json:"retry_after"`
			} `json:"parameters"`
		}
		if r.status != gateway.StatusNotDispatched || json.Unmarshal(r.body, &env) != nil || env.Parameters.RetryAfter != 1 {
			t.Errorf("%s: %d %s; want 503 with parameters.retry_after 1", name, r.status, r.body)
		}
	}
}
