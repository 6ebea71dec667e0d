package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// updates show prints an update's attempts, oldest first, with the app's
// answers masked, a requeue among them, and the attempt still running;
// --json has them under "history".
func TestUpdatesShowTimeline(t *testing.T) {
	const token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "tgrelay.db")
	st, err := openStore(ctx, db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	if _, err := st.store.Add(ctx, intake.Incoming{UpdateID: 5, Body: []byte(`{"update_id":5}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := st.store.Claim(ctx, 5, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	end := now.Add(1500 * time.Millisecond)
	if ok, err := st.store.Settle(ctx, id, intake.Settlement{State: intake.StateAbandoned, At: end, Error: "forward: update endpoint answered 400 Bad Request"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	rec := intake.AttemptRecord{UpdateID: 5, Attempt: 1, ClaimID: id.ClaimID, Process: "proc-a", StartedAt: now, EndedAt: end,
		Outcome: intake.AttemptFailed, Error: "forward: update endpoint answered 400 Bad Request", Status: 400,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"error":"chat not found","via":"https://api.telegram.org/bot` + token + `/sendMessage"}`)}
	if ok, err := st.RecordAttempt(ctx, rec); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := st.Requeue(ctx, 5, end.Add(time.Second)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, ok, err := st.store.Claim(ctx, 5, intake.ClaimOpts{Now: end.Add(2 * time.Second), LeaseUntil: end.Add(time.Hour), MaxAttempts: 5}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	st.Close()

	show, err := runUpdatesCapture(t, "show", "5", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"attempts (oldest first", "requeued", "running", "1.5s", "proc-a", "400",
		"error: forward: update endpoint answered 400 Bad Request", "headers: Content-Type: application/json",
		`body: {"error":"chat not found","via":"https://api.telegram.org/bot123456789:[redacted]/sendMessage"}`} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if strings.Index(show, "failed") > strings.Index(show, "requeued") || strings.Index(show, "requeued") > strings.Index(show, "running") {
		t.Errorf("show's timeline is not failed, requeued, running in that order:\n%s", show)
	}
	asJSON, err := runUpdatesCapture(t, "show", "--json", "5", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{"show": show, "show --json": asJSON} {
		if strings.Contains(out, "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ") {
			t.Errorf("%s shows the token:\n%s", what, out)
		}
	}
	var got struct {
		Attempts int `json:"attempts"`
		History  []struct {
			Attempt    int
			Outcome    string
			Derived    bool
			Status     int
			DurationMS *int64 `json:"duration_ms"`
			Header     map[string]string
			Body       string
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(asJSON), &got); err != nil {
		t.Fatalf("show --json: %v\n%s", err, asJSON)
	}
	h := got.History
	if got.Attempts != 1 || len(h) != 3 || h[0].Outcome != "failed" || h[1].Outcome != "requeued" || h[2].Outcome != "running" || !h[2].Derived {
		t.Fatalf("show --json: attempts %d, history %+v; want failed, requeued, running (derived)", got.Attempts, h)
	}
	if h[0].Status != 400 || h[0].DurationMS == nil || *h[0].DurationMS != 1500 || h[0].Header["Content-Type"] != "application/json" ||
		!strings.Contains(h[0].Body, "chat not found") {
		t.Errorf("show --json's failed attempt = %+v", h[0])
	}
}
