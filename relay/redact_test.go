package relay_test

import (
	"net"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// The app's URL carries the app's secret token in its path (a secret path,
// as some apps check), and the app is down: the forward's error quotes the
// URL (today the forward leaves the URL out; this holds it to that). Neither the log, nor the row's stored error, nor the exhaustion
// payload delivered to the exhaustion endpoint shows the secret: the relay
// masks every secret it is configured with.
func TestRelayMasksSecretsInStoredErrors(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	logs, rec := &syncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	const appSecret = "app-secret-path-token-42"
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := closed.Addr().String()
	closed.Close()
	cfg.Forward.URL = "http://" + down + "/hook/" + appSecret
	cfg.Forward.AppSecretToken = appSecret
	cfg.Forward.ExhaustionURL = ep.exhaustionURL()
	cfg.MaxAttempts = 2
	st := cfg.Store.(*sqlitestore.Store)
	start(t, cfg)
	ups := sendChatter(t, srv, 1, 1)
	waitFor(t, "the exhaustion delivered", func() bool { return len(ep.exhaustionPayloads()) == 1 })

	p := ep.exhaustionPayloads()[0]
	row, ok, err := st.Get(t.Context(), ups[0].ID)
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	texts := map[string]string{"exhaustion payload": p.Error, "stored error": row.Error, "log": logs.String()}
	for what, text := range texts {
		if strings.Contains(text, appSecret) {
			t.Errorf("%s shows the app secret: %s", what, text)
		}
		assertNoSecrets(t, what, text, srv.Token)
	}
	for _, text := range []string{p.Error, row.Error} {
		if !strings.Contains(text, "connection refused") {
			t.Errorf("stored error %q: want the cause", text)
		}
	}
}
