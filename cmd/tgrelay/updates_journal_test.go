package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// TestUpdatesShowJournal: show lists the calls the gateway journaled for
// the update, with their outcomes; a pending one is shown as pending.
func TestUpdatesShowJournal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "tgrelay.db")
	st, err := openStore(ctx, db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.store.Add(ctx, intake.Incoming{UpdateID: 8, Body: []byte(`{"update_id":8}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, _, err := st.store.Claim(ctx, 8, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	j := st.store.(intake.JournalStore)
	sent := intake.Call{Method: "sendMessage", ParamsHash: "aa", Occurrence: 1}
	lost := intake.Call{Method: "sendPhoto", ParamsHash: "bb", Occurrence: 1}
	for _, c := range []intake.Call{sent, lost} {
		if _, in, err := j.RecordIntent(ctx, id, c, now); err != nil || in != intake.IntentRecorded {
			t.Fatal(in, err)
		}
	}
	if ok, err := j.RecordOutcome(ctx, id, sent, intake.CallResult{Outcome: intake.CallAnswered, Status: 200, Body: []byte(`{"ok":true}`)}, now); err != nil || !ok {
		t.Fatal(ok, err)
	}
	st.Close()

	out, err := runUpdatesCapture(t, "show", "8", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"calls (journaled", "sendMessage", "answered", "200", "sendPhoto", "pending"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out, err = runUpdatesCapture(t, "show", "--json", "8", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		UpdateID int64      `json:"update_id"`
		Calls    []callJSON `json:"calls"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.UpdateID != 8 || len(r.Calls) != 2 || r.Calls[0].Outcome != "answered" || r.Calls[1].Outcome != "pending" {
		t.Errorf("show --json = %+v (%v)\n%s", r, err, out)
	}
}
