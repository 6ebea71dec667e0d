package dashboard_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake"
)

// expireOne records update id as a callback query that ended expired, as
// the runner leaves it: abandoned, settled, its error opening with
// intake.ExpiredText.
func expireOne(t *testing.T, st store, id int64) {
	t.Helper()
	ctx := t.Context()
	b := []byte(fmt.Sprintf(`{"update_id":%d,`, id) + `"callback_query":{"id":"q","from":{"id":101},"message":{"message_id":1,"chat":{"id":101,"type":"private"}},"data":"x"}}`)
	if _, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: b, ReceivedAt: base}); err != nil {
		t.Fatal(err)
	}
	ident, ok, err := st.Claim(ctx, id, intake.ClaimOpts{Now: base.Add(time.Second), LeaseUntil: base.Add(time.Hour), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("claim %d: %v %v", id, ok, err)
	}
	s := intake.Settlement{State: intake.StateAbandoned, At: base.Add(16 * time.Second), Error: intake.ExpiredText + " (callback_query)"}
	if ok, err := st.Settle(ctx, ident, s); err != nil || !ok {
		t.Fatalf("settle %d: %v %v", id, ok, err)
	}
}

// An expired update is shown as "expired", found by the expired filter,
// charted, and offers no requeue (it would expire again at once).
func TestExpiredUpdatesShown(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			fill(t, st, 6, true) // 7 is an exhaustion
			expireOne(t, st, 8)
			rec := dashboard.NewRecorder()
			rec.Observer().ExpireFunc(intake.Expiry{Identity: intake.Identity{UpdateID: 8, Attempt: 1}, Kind: "callback_query"})
			s := serve(t, dashboard.Config{Store: st, Recorder: rec})

			_, list := s.get(t, "/updates?state=expired")
			ids := regexp.MustCompile(`href="/updates/(\d+)"`).FindAllStringSubmatch(list, -1)
			if len(ids) != 1 || ids[0][1] != "8" {
				t.Fatalf("expired filter lists %v, want only update 8:\n%s", ids, list)
			}
			mustContain(t, "expired list", list, `class="state state-expired">expired</span>`, `<option value="expired" selected>`)
			_, all := s.get(t, "/updates?state=abandoned")
			mustContain(t, "abandoned list", all, `state-expired">expired`)

			code, page := s.get(t, "/updates/8")
			if code != http.StatusOK {
				t.Fatalf("update page: %d", code)
			}
			mustContain(t, "update page", page, `state-expired">expired`)
			if strings.Contains(page, `data-action="requeue"`) {
				t.Error("an expired update offers a requeue")
			}
			_, over := s.get(t, "/")
			mustContain(t, "overview", over, "Expired")
			if got := rec.Snapshot().Totals[dashboard.SeriesExpired]; got != 1 {
				t.Errorf("expired series total %d, want 1", got)
			}
		})
	}
}
