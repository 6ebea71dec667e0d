package telegramtest_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/telegramtest"
)

func TestSetWebhookErrorShowsInGetWebhookInfo(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(srv.Close)
	c, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	info := func() (date int64, msg string) {
		t.Helper()
		raw, err := c.Call(t.Context(), "getWebhookInfo", struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		var in struct {
			Date int64  `json:"last_error_date"`
			Msg  string `json:"last_error_message"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatal(err)
		}
		return in.Date, in.Msg
	}
	at := time.Unix(1_800_000_000, 0)
	const msg = "Failed to resolve host: Name or service not known"
	srv.SetWebhookError(at, msg)
	if d, m := info(); d != at.Unix() || m != msg {
		t.Errorf("getWebhookInfo last error = %d %q, want %d %q", d, m, at.Unix(), msg)
	}
	srv.SetWebhookError(time.Time{}, "")
	if d, m := info(); d != 0 || m != "" {
		t.Errorf("after clearing: %d %q", d, m)
	}
}
