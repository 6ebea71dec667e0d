package relay_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
)

// A webhook reply the gateway refuses (no method name, or a method the
// relay keeps for itself) is not sent and its update completes: that is
// said in a log line naming the update, never left to a counter alone.
func TestRelayLogsARefusedWebhookReply(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"method":"send Message","chat_id":1,"text":"a"},{"method":"getUpdates"}]`)
	}))
	t.Cleanup(app.Close)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), logs, rec)
	cfg.Forward = forward.Config{URL: app.URL}
	cfg.Gateway = relay.GatewayConfig{Listener: listen(t)}
	start(t, cfg)
	ups := sendChatter(t, srv, 1, 1)
	testkit.WaitFor(t, "the settlement", func() bool { return rec.count("settled") == 1 })
	lines := logLines(logs, "relay: the gateway refused a webhook reply in the app's answer; it is not sent")
	if len(lines) != 2 {
		t.Fatalf("%d log lines of a refused reply, want 2:\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		if l["update_id"] != float64(ups[0].ID) || l["method"] == "" || l["status"] == nil {
			t.Errorf("log line %v: want the update, method and status", l)
		}
	}
}
