package intake_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// TestWebhookBodyLongerThanItsDeclaredLength checks the webhook mounted
// behind plumbing whose body reader does not stop at Content-Length (here
// ServeHTTP called directly): a body longer than it declares is refused
// with 400 and not recorded, though its declared prefix is an update.
// A body exactly as long as it declares is recorded.
func TestWebhookBodyLongerThanItsDeclaredLength(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: newRunner(t, intake.Config{Store: store, Handler: nop}), Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(id int64, trailer string) int {
		t.Helper()
		declared := string(msg(id, 1))
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/telegram", strings.NewReader(declared+trailer))
		req.ContentLength = int64(len(declared))
		req.Header.Set(intake.SecretHeader, testSecret)
		rw := httptest.NewRecorder()
		wh.ServeHTTP(rw, req)
		return rw.Code
	}
	if got := serve(1, ""); got != http.StatusOK {
		t.Errorf("body of its declared length: status %d, want 200", got)
	}
	if got := serve(2, `{"update_id":3}`); got != http.StatusBadRequest {
		t.Errorf("body longer than its declared length: status %d, want 400", got)
	}
	if _, ok, err := store.Get(t.Context(), 1); err != nil || !ok {
		t.Errorf("update 1 not recorded: %v, %v", ok, err)
	}
	if _, ok, _ := store.Get(t.Context(), 2); ok {
		t.Error("update 2 recorded from a body longer than its declared length")
	}
}
