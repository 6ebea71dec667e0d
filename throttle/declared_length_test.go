package throttle_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/throttle"
)

// The transport sizes its read of a body by the length the request
// declares, but a wrong declaration changes nothing: the whole body is
// read, searched and sent on, byte for byte.
func TestInspectIgnoresAWrongDeclaredLength(t *testing.T) {
	long := `{"text":"` + strings.Repeat("x", throttle.MaxPeekBytes) + `","chat_id":7}`
	for _, body := range []string{`{"chat_id":42,"text":"hi"}`, `{"text":"hi","chat_id":42}`, long} {
		n := int64(len(body))
		for _, declared := range []int64{-1, 0, 1, n / 2, n - 1, n, n + 1, 10 * n} {
			req, err := http.NewRequest(http.MethodPost, "http://x/bot1:t/sendMessage", io.NopCloser(strings.NewReader(body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.ContentLength = declared
			chat, found, _, out, _, err := throttle.Inspect(req)
			if err != nil {
				t.Fatalf("declared %d of %d: %v", declared, n, err)
			}
			got, err := io.ReadAll(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, []byte(body)) {
				t.Errorf("declared %d of %d: sent %d bytes, want the body's %d", declared, n, len(got), n)
			}
			if len(body) < throttle.MaxPeekBytes && (!found || chat != 42) {
				t.Errorf("declared %d of %d: chat %d found %v, want 42", declared, n, chat, found)
			}
		}
	}
}
