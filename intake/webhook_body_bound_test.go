package intake_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
)

// paddedUpdate returns the body of update id, padded to exactly n bytes.
func paddedUpdate(t *testing.T, id int64, n int) []byte {
	t.Helper()
	head := fmt.Sprintf(`{"update_id":%d,"pad":"`, id)
	pad := n - len(head) - len(`"}`)
	if pad < 0 {
		t.Fatalf("update %d cannot be padded to %d bytes", id, n)
	}
	return []byte(head + strings.Repeat("x", pad) + `"}`)
}

// TestWebhookChunkedBodyBoundIsExact checks the body limit of a body of
// unknown length (chunked, no Content-Length) at its edge: a body of
// exactly MaxBodyBytes is recorded, one byte more is answered 413 and not
// recorded, as for a body of declared length.
func TestWebhookChunkedBodyBoundIsExact(t *testing.T) {
	t.Parallel()
	const limit = 128
	b := setupWebhook(t, intake.WebhookConfig{Secret: testSecret, MaxBodyBytes: limit})
	post := func(body []byte, chunked bool) int {
		t.Helper()
		if chunked {
			return b.postUnknownLength(t, body)
		}
		return b.do(t, http.MethodPost, map[string][]string{intake.SecretHeader: {testSecret}}, body).StatusCode
	}
	for _, tc := range []struct {
		id      int64
		size    int
		chunked bool
		want    int
	}{
		{1, limit, true, http.StatusOK},
		{2, limit + 1, true, http.StatusRequestEntityTooLarge},
		{3, limit, false, http.StatusOK},
		{4, limit + 1, false, http.StatusRequestEntityTooLarge},
	} {
		body := paddedUpdate(t, tc.id, tc.size)
		if got := post(body, tc.chunked); got != tc.want {
			t.Errorf("update %d, %d bytes (chunked %v), limit %d: status %d, want %d", tc.id, tc.size, tc.chunked, limit, got, tc.want)
		}
		_, recorded, err := b.store.Get(t.Context(), tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if want := tc.want == http.StatusOK; recorded != want {
			t.Errorf("update %d, %d bytes (chunked %v): recorded %v, want %v", tc.id, tc.size, tc.chunked, recorded, want)
		}
	}
}
