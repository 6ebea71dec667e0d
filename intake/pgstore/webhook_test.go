package pgstore_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
)

// Every body the webhook takes for an update is recorded on PostgreSQL,
// byte for byte, and answered 200 (again 200, and not recorded twice, when
// it comes back); a body it does not take is 400. None is answered 503: a
// body that can never be stored would be delivered again by Telegram until
// it gives up, and counted as a store failure all along. A chat id holding
// a NUL (\u0000) did exactly that, since a PostgreSQL text cannot hold one.
func TestWebhookOddBodiesAreStoredOrRefused(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	r, err := intake.New(intake.Config{Store: st, Handler: func(context.Context, intake.Update) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, InsecureNoSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wh)
	t.Cleanup(srv.Close)
	post := func(body string) int {
		t.Helper()
		res, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		name, body string
		id         int64 // -1: refused with 400
	}{
		{"NUL chat id", `{"update_id":1,"message":{"chat":{"id":"\u0000","type":"private"}}}`, 1},
		{"NUL inside a chat id", `{"update_id":2,"message":{"from":{"id":"a\u0000b"}}}`, 2},
		{"NUL chat type", `{"update_id":3,"message":{"chat":{"id":3,"type":"\u0000"}}}`, 3},
		{"NUL text", `{"update_id":4,"message":{"chat":{"id":4},"text":"\u0000"}}`, 4},
		{"invalid UTF-8 chat id", "{\"update_id\":5,\"message\":{\"chat\":{\"id\":\"\xff\xfe\"}}}", 5},
		{"invalid UTF-8 text", "{\"update_id\":6,\"message\":{\"chat\":{\"id\":6},\"text\":\"\xc3\x28\"}}", 6},
		{"lone surrogate chat id", `{"update_id":7,"message":{"chat":{"id":"\ud800"}}}`, 7},
		{"huge numeric chat id", `{"update_id":8,"message":{"chat":{"id":1e400}}}`, 8},
		{"long chat id", `{"update_id":9,"message":{"chat":{"id":` + strings.Repeat("9", 100) + `}}}`, 9},
		{"chat id of odd type", `{"update_id":10,"message":{"chat":{"id":{"id":1}}},"edited_message":[1]}`, 10},
		{"duplicate update_id", `{"update_id":11,"update_id":12}`, -1},
		{"update_id zero", `{"update_id":0}`, 0},
		{"largest update_id", `{"update_id":9007199254740991}`, intake.MaxUpdateID},
		{"update_id above 2^53-1", `{"update_id":9223372036854775807}`, -1},
		{"byte order mark", "\xef\xbb\xbf{\"update_id\":13}", -1},
		{"NUL byte", "{\"update_id\":14,\"message\":{\"text\":\"\x00\"}}", -1},
		{"deep nesting", `{"update_id":15,"message":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, -1},
		{"trailing garbage", `{"update_id":16}x`, -1},
		{"array", `[{"update_id":17}]`, -1},
		{"empty object", `{}`, -1},
	} {
		want := http.StatusOK
		if tc.id < 0 {
			want = http.StatusBadRequest
		}
		for try := range 2 {
			if got := post(tc.body); got != want {
				t.Errorf("%s: POST #%d answered %d, want %d", tc.name, try+1, got, want)
			}
		}
		if tc.id < 0 {
			continue
		}
		row, ok, err := st.Get(t.Context(), tc.id)
		if err != nil || !ok || !bytes.Equal(row.Body, []byte(tc.body)) {
			t.Errorf("%s: row %d = %q, %v, %v; want the body byte for byte", tc.name, tc.id, row.Body, ok, err)
		}
	}
}
