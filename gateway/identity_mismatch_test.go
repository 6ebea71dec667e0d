package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/wire"
)

// TestIdentityHeadersMustAgreeWithTheRoot: a call under one attempt's
// per-attempt root that carries identity headers naming another attempt
// is refused 400 and not sent: neither identity is taken over the other
// (the headers would otherwise let a stale root's call pass as a live
// attempt's, or the reverse).
func TestIdentityHeadersMustAgreeWithTheRoot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	stale := f.claim(t, 33)
	f.fail(t, stale)
	live := f.reclaim(t, 33)
	for name, ids := range map[string][2]intake.Identity{"stale root, live headers": {stale, live}, "live root, stale headers": {live, stale}} {
		root, hdr := ids[0], ids[1]
		b, _ := json.Marshal(map[string]any{"chat_id": f.chat.ID, "text": "which attempt"})
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, attemptRoot(f.srv.URL, root)+"/bot"+f.tg.Token+"/sendMessage", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		wire.SetIdentity(req.Header, hdr.UpdateID, hdr.Attempt, hdr.ClaimID)
		if r := do(t, req); r.status != http.StatusBadRequest || r.header.Get(wire.HeaderOutcome) != string(wire.OutcomeRefused) {
			t.Errorf("%s: %d %s; want 400 refused", name, r.status, r.body)
		}
	}
	if n := f.ledger("which attempt"); n != 0 {
		t.Errorf("ledger holds %d messages; want none", n)
	}
}
