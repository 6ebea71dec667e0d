package relay_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
)

// An app that answers with a webhook reply whose method names the bot
// token or the webhook secret (a buggy app echoing its configuration)
// never gets either into an event the observers see, what the relay
// tells Forward.ReplyFunc and Forward.UnactedReplyFunc, nor a log line.
func TestRelayReplyMethodWithSecretsIsMasked(t *testing.T) {
	t.Parallel()
	for _, gateway := range []bool{false, true} {
		t.Run(fmt.Sprintf("gateway %v", gateway), func(t *testing.T) {
			t.Parallel()
			srv := fakeTelegram(t)
			app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, half, _ := strings.Cut(srv.Token, ":")
				fmt.Fprintf(w, `[{"method":%q,"chat_id":1,"text":"a"},{"method":%q},{"method":%q}]`, srv.Token, testSecret, half)
			}))
			t.Cleanup(app.Close)
			logs, rec := &testkit.SyncBuffer{}, newRecorder()
			cfg := baseConfig(t, srv, newBotEndpoint(t, nil), logs, rec)
			cfg.Secret = testSecret
			var mu sync.Mutex
			var told []any
			tell := func(v any) {
				mu.Lock()
				told = append(told, v)
				mu.Unlock()
			}
			cfg.Forward = forward.Config{URL: app.URL,
				ReplyFunc:        func(r forward.Reply) { tell(r) },
				UnactedReplyFunc: func(r forward.UnactedReply) { tell(r) }}
			if gateway {
				cfg.Gateway = relay.GatewayConfig{Listener: listen(t)}
			} else {
				cfg.Gateway = relay.GatewayConfig{Disable: true}
			}
			start(t, cfg)
			sendChatter(t, srv, 1, 1)
			testkit.WaitFor(t, "the settlement", func() bool { return rec.count("settled") == 1 })
			rec.mu.Lock()
			events := fmt.Sprintf("%+v", rec.events)
			rec.mu.Unlock()
			assertNoSecrets(t, "the events", events, srv.Token)
			assertNoSecrets(t, "the log", logs.String(), srv.Token)
			mu.Lock()
			defer mu.Unlock()
			if len(told) == 0 {
				t.Fatalf("the reply funcs were told nothing")
			}
			assertNoSecrets(t, "what the reply funcs were told", fmt.Sprintf("%+v", told), srv.Token)
		})
	}
}
