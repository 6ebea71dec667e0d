package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake"
)

// updates show, show --json and ls mask a stored body and error as the
// dashboard does (one rule, dashboard.FormatBody): a value shaped like a
// bot token always, and the secrets serve reads from the environment.
func TestUpdatesMaskAsTheDashboard(t *testing.T) {
	const (
		token  = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"
		secret = "wh-secret-0123456789abcdef"
	)
	t.Setenv("TGRELAY_WEBHOOK_SECRET", secret)
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "tgrelay.db")
	st, err := openStore(ctx, db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"update_id":9,"message":{"chat":{"id":7},"text":"token ` + token + ` secret ` + secret + `"}}`)
	now := time.Now()
	if _, err := st.store.Add(ctx, intake.Incoming{UpdateID: 9, Body: body, ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := st.store.Claim(ctx, 9, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := st.store.Settle(ctx, id, intake.Settlement{State: intake.StateFailed, At: now, RetryAt: now.Add(time.Hour),
		Error: `Post "https://api.telegram.org/bot` + token + `/sendMessage?s=` + secret + `": refused`}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	st.Close()

	show, err := runUpdatesCapture(t, "show", "9", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	asJSON, err := runUpdatesCapture(t, "show", "--json", "9", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := runUpdatesCapture(t, "ls", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{"show": show, "show --json": asJSON, "ls": ls} {
		for _, s := range []string{token, "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ", secret} {
			if strings.Contains(out, s) {
				t.Errorf("%s shows %q:\n%s", what, s, out)
			}
		}
	}
	red := &botapi.Redactor{}
	red.Add(secret)
	want := dashboard.FormatBody(body, 0, red).Text
	if !strings.Contains(show, "body:\n"+want+"\n") {
		t.Errorf("show's body is not the dashboard's masking %q:\n%s", want, show)
	}
	if !strings.Contains(show, "bot123456789:[redacted]/sendMessage?s=[redacted]") {
		t.Errorf("show's error is not masked, or lost its shape:\n%s", show)
	}
	var r struct {
		Error string
		Body  struct {
			Message struct{ Text string } `json:"message"`
		} `json:"body"`
	}
	if err := json.Unmarshal([]byte(asJSON), &r); err != nil || r.Body.Message.Text != "token 123456789:[redacted] secret [redacted]" {
		t.Errorf("show --json = %+v (%v)\n%s", r, err, asJSON)
	}
}
