package forward_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/wire"
)

func TestAppSecretTokenOnUpdatesOnly(t *testing.T) {
	t.Parallel()
	app, appSrv := newEndpoint(t, http.StatusOK, nil)
	exh, exhSrv := newEndpoint(t, http.StatusOK, nil)
	exh.ack = true
	f := newForwarder(t, forward.Config{URL: appSrv.URL, ExhaustionURL: exhSrv.URL, AppSecretToken: "app-secret_1",
		APIRoot: "http://127.0.0.1:8081"})
	if err := f.Handle(t.Context(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt); err != nil {
		t.Fatal(err)
	}
	if got := app.got()[0].header; got.Get(forward.HeaderTelegramSecret) != "app-secret_1" || got.Get(wire.HeaderAPIRoot) == "" {
		t.Errorf("update forward secret header = %q, API root %q", got.Get(forward.HeaderTelegramSecret), got.Get(wire.HeaderAPIRoot))
	}
	if err := f.HandleExhaustion(t.Context(), intake.Exhaustion{Identity: attempt.Identity, Body: []byte(`{"update_id":42}`)}); err != nil {
		t.Fatal(err)
	}
	if got := exh.got()[0].header.Values(forward.HeaderTelegramSecret); len(got) != 0 {
		t.Errorf("an exhaustion carried the app's secret: %q", got)
	}
	// The API root is announced to update forwards only: an exhaustion has
	// no attempt left to make calls for.
	if got := exh.got()[0].header.Values(wire.HeaderAPIRoot); len(got) != 0 {
		t.Errorf("an exhaustion announced an API root: %q", got)
	}
	for _, bad := range []string{"has space", strings.Repeat("a", 257), "ünï"} {
		if _, err := forward.New(forward.Config{URL: appSrv.URL, AppSecretToken: bad}); err == nil || !strings.Contains(err.Error(), "AppSecretToken") {
			t.Errorf("New(AppSecretToken %q) = %v, want an error naming the field", bad, err)
		}
	}
}

func TestExhaustionNeedsExplicitAck(t *testing.T) {
	t.Parallel()
	// A bot framework's webhook handler answers 200 to any JSON: that is not
	// an acknowledgment.
	exh, exhSrv := newEndpoint(t, http.StatusOK, nil)
	f := newForwarder(t, forward.Config{ExhaustionURL: exhSrv.URL})
	e := intake.Exhaustion{Identity: attempt.Identity, Error: "boom", Body: []byte(`{"update_id":42,"message":{"text":"x"}}`)}
	err := f.HandleExhaustion(t.Context(), e)
	ue, ok := errors.AsType[*forward.UnacknowledgedError](err)
	if !ok || ue.Code != 200 || ue.Got != "" || !strings.Contains(err.Error(), forward.HeaderAck) {
		t.Fatalf("a 200 without %s = %v, want *UnacknowledgedError", forward.HeaderAck, err)
	}
	// Another claim's id does not acknowledge this one either.
	exh.mu.Lock()
	exh.header = http.Header{forward.HeaderAck: {"some-other-claim"}}
	exh.mu.Unlock()
	if err := f.HandleExhaustion(t.Context(), e); !errors.As(err, &ue) || ue.Got != "some-other-claim" {
		t.Fatalf("a wrong ack = %v", err)
	}
	exh.mu.Lock()
	exh.header, exh.ack = nil, true
	exh.mu.Unlock()
	if err := f.HandleExhaustion(t.Context(), e); err != nil {
		t.Fatalf("echoing the claim id = %v, want acknowledged", err)
	}

	// An exhaustion without a claim id is not sent: an answer without the
	// header would echo its empty claim id and pass for an acknowledgment.
	sent := len(exh.got())
	noClaim := e
	noClaim.ClaimID = ""
	if err := f.HandleExhaustion(t.Context(), noClaim); err == nil || !strings.Contains(err.Error(), "no claim id") {
		t.Errorf("an exhaustion without a claim id = %v, want refused", err)
	}
	if got := len(exh.got()); got != sent {
		t.Errorf("an exhaustion without a claim id was sent (%d deliveries, want %d)", got, sent)
	}

	// The body has no top-level update_id: nothing mistakes it for an update.
	body := exh.got()[0].body
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["update_id"]; ok || len(top) != 1 || top["tgrelay_exhaustion"] == nil {
		t.Errorf("exhaustion body keys = %v, want only tgrelay_exhaustion", top)
	}
	p, err := forward.DecodeExhaustion(bytes.NewReader(body))
	if err != nil || p.UpdateID != 42 || p.ClaimID != "c-1" || p.Error != "boom" {
		t.Errorf("DecodeExhaustion = %+v, %v", p, err)
	}
	if _, err := forward.DecodeExhaustion(strings.NewReader(`{"update_id":1,"message":{}}`)); !errors.Is(err, forward.ErrNotExhaustion) {
		t.Errorf("DecodeExhaustion(an update) = %v, want ErrNotExhaustion", err)
	}

	// A stored body that is not JSON is delivered all the same, as a JSON
	// string, so the payload stays valid JSON.
	e.Body = []byte(`{"update_id":42,"cut`)
	if err := f.HandleExhaustion(t.Context(), e); err != nil {
		t.Fatalf("an exhaustion of an unparsable body = %v, want delivered", err)
	}
	got := exh.got()
	p, err = forward.DecodeExhaustion(bytes.NewReader(got[len(got)-1].body))
	var s string
	if err != nil || json.Unmarshal(p.Update, &s) != nil || s != string(e.Body) {
		t.Errorf("DecodeExhaustion = %+v, %v; want the unparsable body as a JSON string", p, err)
	}
}

func TestUnactedRepliesAreCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		body   string
		method string
		counts bool
		reason string // a part of the reported Reason
	}{
		{"telegraf's answerCallbackQuery", `{"method":"answerCallbackQuery","callback_query_id":"1"}`, "answerCallbackQuery", true, "does not perform"},
		{"sendMessage with whitespace", "\n {\"method\":\"sendMessage\",\"chat_id\":5,\"text\":\"hi\"}\n", "sendMessage", true, "does not perform"},
		{"empty", "", "", false, ""},
		{"plain OK", "OK", "", false, ""},
		{"empty object", "{}", "", false, ""},
		{"status object", `{"ok":true}`, "", false, ""},
		{"not JSON", "{method", "", false, ""},
		{"too large to read", `{"method":"sendDocument","document":"` + strings.Repeat("A", forward.DefaultMaxResponseBytes) + `"}`, "", true, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			app, srv := newEndpoint(t, http.StatusOK, nil)
			app.body = []byte(tc.body)
			var mu sync.Mutex
			var seen []forward.UnactedReply
			f := newForwarder(t, forward.Config{URL: srv.URL, UnactedReplyFunc: func(r forward.UnactedReply) {
				mu.Lock()
				seen = append(seen, r)
				mu.Unlock()
			}})
			if err := f.Handle(t.Context(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt); err != nil {
				t.Fatal(err)
			}
			want := uint64(0)
			if tc.counts {
				want = 1
			}
			if got := f.UnactedReplies(); got != want {
				t.Fatalf("UnactedReplies = %d, want %d", got, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != int(want) {
				t.Fatalf("UnactedReplyFunc saw %d, want %d", len(seen), want)
			}
			if tc.counts && (seen[0].Method != tc.method || seen[0].UpdateID != 42 || seen[0].Attempt != 2 || seen[0].Reason == "") {
				t.Errorf("reported %+v", seen[0])
			}
			if tc.counts && (seen[0].Bytes != min(len(tc.body), forward.DefaultMaxResponseBytes) || !strings.Contains(seen[0].Reason, tc.reason)) {
				t.Errorf("reported %d bytes, reason %q; want %d bytes (at most DefaultMaxResponseBytes), a reason with %q",
					seen[0].Bytes, seen[0].Reason, min(len(tc.body), forward.DefaultMaxResponseBytes), tc.reason)
			}
		})
	}
}
