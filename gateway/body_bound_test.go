package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
)

// TestBodyOfExactlyTheBoundFits: a JSON body of exactly
// Config.MaxBufferedBody bytes fits, and one byte more is refused 413,
// whether the app states its length or sends it chunked (read in steps of
// 64 KiB, one of which may end right at the bound).
func TestBodyOfExactlyTheBoundFits(t *testing.T) {
	t.Parallel()
	const bound = 128 << 10
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.MaxBufferedBody = bound }})
	body := func(n int) []byte {
		b := fmt.Appendf(nil, `{"chat_id":%d,"text":"fits"}`, f.chat.ID)
		return append(b, strings.Repeat(" ", n-len(b))...)
	}
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"sized, at the bound", bound, false, http.StatusOK},
		{"chunked, at the bound", bound, true, http.StatusOK},
		{"sized, past the bound", bound + 1, false, http.StatusRequestEntityTooLarge},
		{"chunked, past the bound", bound + 1, true, http.StatusRequestEntityTooLarge},
	} {
		var r io.Reader = bytes.NewReader(body(tc.size))
		if tc.chunked {
			r = io.MultiReader(r) // no length known: sent chunked
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+"/bot"+f.tg.Token+"/sendMessage", r)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if got := do(t, req); got.status != tc.want {
			t.Errorf("%s: %d %s; want %d", tc.name, got.status, got.body, tc.want)
		}
	}
}
