package intake_test

import (
	"errors"

	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

const testSecret = "s3cr3t-Token_value"

type webhookBundle struct {
	store *faultStore
	srv   *httptest.Server
	logs  *testkit.SyncBuffer
}

func setupWebhook(t *testing.T, cfg intake.WebhookConfig) *webhookBundle {
	t.Helper()
	b := &webhookBundle{store: newFaultStore(), logs: &testkit.SyncBuffer{}}
	logger := slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Runner = newRunner(t, intake.Config{Store: b.store, Handler: nop, Logger: logger})
	cfg.Logger = logger
	wh, err := intake.NewWebhook(cfg)
	if err != nil {
		t.Fatalf("NewWebhook: %v", err)
	}
	b.srv = httptest.NewServer(wh)
	t.Cleanup(b.srv.Close)
	return b
}

func (b *webhookBundle) do(t *testing.T, method string, header map[string][]string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+"/telegram", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// postUnknownLength POSTs body with the test secret as a body of unknown
// length, which the client sends chunked, and returns the status.
func (b *webhookBundle) postUnknownLength(t *testing.T, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL+"/telegram", io.MultiReader(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(intake.SecretHeader, testSecret)
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if req.ContentLength != 0 {
		t.Fatalf("request sent with length %d; want it unknown (chunked)", req.ContentLength)
	}
	return resp.StatusCode
}

func withSecret(s string) map[string][]string {
	return map[string][]string{intake.SecretHeader: {s}, "Content-Type": {"application/json"}}
}

func TestWebhookStatuses(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t, intake.WebhookConfig{Secret: testSecret, MaxBodyBytes: 128})
	big := append(msg(50, 1)[:len(msg(50, 1))-1], []byte(`,"pad":"`+strings.Repeat("x", 128)+`"}`)...)
	atLimit := []byte(`{"update_id":77,"pad":"` + strings.Repeat("y", 128-len(`{"update_id":77,"pad":""}`)) + `"}`)
	if len(atLimit) != 128 {
		t.Fatalf("test body is %d bytes", len(atLimit))
	}
	for _, tc := range []struct {
		name   string
		method string
		header map[string][]string
		body   []byte
		want   int
	}{
		{"GET", http.MethodGet, withSecret(testSecret), nil, http.StatusMethodNotAllowed},
		{"PUT", http.MethodPut, withSecret(testSecret), msg(1, 1), http.StatusMethodNotAllowed},
		{"no secret", http.MethodPost, nil, msg(2, 1), http.StatusForbidden},
		{"wrong secret", http.MethodPost, withSecret("s3cr3t-Token_valuE"), msg(3, 1), http.StatusForbidden},
		{"secret prefix", http.MethodPost, withSecret("s3cr3t"), msg(4, 1), http.StatusForbidden},
		{"secret twice", http.MethodPost, map[string][]string{intake.SecretHeader: {testSecret, testSecret}}, msg(5, 1), http.StatusForbidden},
		{"wrong secret, body too large", http.MethodPost, withSecret("nope"), big, http.StatusForbidden},
		{"body too large", http.MethodPost, withSecret(testSecret), big, http.StatusRequestEntityTooLarge},
		{"body at the limit", http.MethodPost, withSecret(testSecret), atLimit, http.StatusOK},
		{"not JSON", http.MethodPost, withSecret(testSecret), []byte("hello"), http.StatusBadRequest},
		{"string update_id", http.MethodPost, withSecret(testSecret), []byte(`{"update_id":"6"}`), http.StatusBadRequest},
		{"accepted", http.MethodPost, withSecret(testSecret), msg(10, 1), http.StatusOK},
		{"duplicate", http.MethodPost, withSecret(testSecret), msg(10, 1), http.StatusOK},
		{"any content type", http.MethodPost, map[string][]string{intake.SecretHeader: {testSecret}, "Content-Type": {"text/plain"}}, msg(11, 1), http.StatusOK},
	} {
		resp := b.do(t, tc.method, tc.header, tc.body)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("%s: Allow %q, want POST", tc.name, resp.Header.Get("Allow"))
		}
	}
	// Only the authorised, well-formed POSTs reached the store.
	for _, id := range []int64{10, 11, 77} {
		if _, ok, err := b.store.Get(t.Context(), id); err != nil || !ok {
			t.Errorf("update %d not recorded", id)
		}
	}
	for _, id := range []int64{1, 2, 3, 4, 5, 50} {
		if _, ok, _ := b.store.Get(t.Context(), id); ok {
			t.Errorf("update %d recorded by a refused request", id)
		}
	}
	if strings.Contains(b.logs.String(), testSecret) {
		t.Fatal("the secret appears in the logs")
	}
}

// TestWebhookRefusesAmbiguousUpdateID: a body whose top-level object holds
// update_id more than once, in any letter case, is answered 400 and
// nothing is recorded. Recorded under one of its ids, it would reach a
// handler that reads another (encoding/json matches "Update_ID" and keeps
// the last; JavaScript and Python keep the last exact key), and the
// dedupe key would not be the id the handler sees.
func TestWebhookRefusesAmbiguousUpdateID(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t, intake.WebhookConfig{Secret: testSecret})
	for _, body := range []string{
		`{"update_id":5,"Update_ID":9,"message":{"chat":{"id":1}}}`,
		`{"update_id":5,"message":{"chat":{"id":1}},"update_id":9}`,
		`{"UPDATE_ID":9,"update_id":5}`,
		`{"update_id":5,"update_id":5}`,
		`{"update\u005fid":5,"update_id":9}`,
		`{"update_id":5,"update_iD":"x"}`,
	} {
		if resp := b.do(t, http.MethodPost, withSecret(testSecret), []byte(body)); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", body, resp.StatusCode)
		}
	}
	for _, id := range []int64{5, 9} {
		if _, ok, _ := b.store.Get(t.Context(), id); ok {
			t.Errorf("update %d recorded from an ambiguous body", id)
		}
	}
	// A nested update_id, or a key that merely starts like it, is no
	// second id.
	for id, body := range map[int64]string{
		6: `{"update_id":6,"message":{"chat":{"id":1},"update_id":7,"Update_ID":8}}`,
		7: `{"update_id":7,"update_ids":8,"Update_I":9}`,
	} {
		if resp := b.do(t, http.MethodPost, withSecret(testSecret), []byte(body)); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d, want 200", body, resp.StatusCode)
		}
		if _, ok, _ := b.store.Get(t.Context(), id); !ok {
			t.Errorf("update %d not recorded", id)
		}
	}
}

// TestWebhookUpdateIDRange: update_id 0 to 2^53-1 is recorded; a larger
// one, which a JavaScript handler reads rounded (so that two updates could
// read as one there), is answered 400 and not recorded. A negative id is
// no id.
func TestWebhookUpdateIDRange(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t, intake.WebhookConfig{Secret: testSecret})
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"update_id":0}`, http.StatusOK},
		{`{"update_id":9007199254740991,"message":{"chat":{"id":1}}}`, http.StatusOK},
		{`{"update_id":9007199254740992,"message":{"chat":{"id":1}}}`, http.StatusBadRequest},
		{`{"update_id":9007199254740993}`, http.StatusBadRequest},
		{`{"update_id":9223372036854775807}`, http.StatusBadRequest},
		{`{"update_id":-1}`, http.StatusBadRequest},
	} {
		if resp := b.do(t, http.MethodPost, withSecret(testSecret), []byte(tc.body)); resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.body, resp.StatusCode, tc.want)
		}
	}
	for id, want := range map[int64]bool{0: true, intake.MaxUpdateID: true, intake.MaxUpdateID + 1: false, intake.MaxUpdateID + 2: false, math.MaxInt64: false} {
		if _, ok, _ := b.store.Get(t.Context(), id); ok != want {
			t.Errorf("update %d recorded: %v, want %v", id, ok, want)
		}
	}
}

func TestWebhookStoreFailureIs503(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t, intake.WebhookConfig{Secret: testSecret})
	b.store.AddBatchFunc = func(context.Context, []intake.AddRequest) ([]intake.AddResult, error) { return nil, errBoom }
	if resp := b.do(t, http.MethodPost, withSecret(testSecret), msg(1, 1)); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "boom") || strings.Contains(logs, testSecret) {
		t.Fatalf("logs %q: want the store error, never the secret", logs)
	}
}

func TestWebhookInsecureNoSecret(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t, intake.WebhookConfig{InsecureNoSecret: true})
	if resp := b.do(t, http.MethodPost, nil, msg(1, 1)); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
}

func TestWebhookConfigValidation(t *testing.T) {
	t.Parallel()
	r := newRunner(t, intake.Config{Store: newFaultStore(), Handler: nop})
	for _, tc := range []struct {
		name string
		cfg  intake.WebhookConfig
		want string
	}{
		{"no runner", intake.WebhookConfig{Secret: testSecret}, "WebhookConfig: Runner is required"},
		{"no secret", intake.WebhookConfig{Runner: r}, "WebhookConfig: Secret is required"},
		{"bad secret shape", intake.WebhookConfig{Runner: r, Secret: "has space"}, "WebhookConfig: Secret must be"},
		{"secret too long", intake.WebhookConfig{Runner: r, Secret: strings.Repeat("a", 257)}, "WebhookConfig: Secret must be"},
		{"secret and insecure", intake.WebhookConfig{Runner: r, Secret: testSecret, InsecureNoSecret: true}, "both set"},
		{"negative body limit", intake.WebhookConfig{Runner: r, Secret: testSecret, MaxBodyBytes: -1}, "WebhookConfig: MaxBodyBytes is -1"},
		{"huge body limit", intake.WebhookConfig{Runner: r, Secret: testSecret, MaxBodyBytes: intake.MaxMaxBodyBytes + 1}, "WebhookConfig: MaxBodyBytes"},
	} {
		_, err := intake.NewWebhook(tc.cfg)
		if _, ok := errors.AsType[*intake.ConfigError](err); !ok {
			t.Errorf("%s: error %v is not a *ConfigError", tc.name, err)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
			continue
		}
		if tc.cfg.Secret != "" && strings.Contains(err.Error(), tc.cfg.Secret) {
			t.Errorf("%s: the error contains the secret", tc.name)
		}
	}
	if _, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, Secret: testSecret}); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}

// TestWebhookBodyOfUnknownLength covers a chunked body (no Content-Length):
// it is bounded by the limit as one of declared length is.
func TestWebhookBodyOfUnknownLength(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t, intake.WebhookConfig{Secret: testSecret, MaxBodyBytes: 128})
	post := func(body []byte) int { return b.postUnknownLength(t, body) }
	if got := post(msg(90, 1)); got != http.StatusOK {
		t.Errorf("chunked update: status %d, want 200", got)
	}
	big := []byte(`{"update_id":91,"pad":"` + strings.Repeat("x", 128) + `"}`)
	if got := post(big); got != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked body over the limit: status %d, want 413", got)
	}
	if _, ok, err := b.store.Get(t.Context(), 90); err != nil || !ok {
		t.Errorf("update 90 not recorded: %v", err)
	}
	if _, ok, _ := b.store.Get(t.Context(), 91); ok {
		t.Error("update 91 recorded from a body over the limit")
	}
}

// TestWebhookBodiesIntactUnderConcurrency posts updates of many sizes at
// once: the webhook reuses its body buffers, so a body kept past Accept
// would be overwritten by a later request. Every stored body and every
// body the handler saw must be the one posted.
func TestWebhookBodiesIntactUnderConcurrency(t *testing.T) {
	t.Parallel()
	const n, conns = 300, 16
	store := memstore.New()
	var mu sync.Mutex
	seen := map[int64][]byte{}
	all := make(chan struct{})
	r := newRunner(t, intake.Config{Store: store, Handler: func(_ context.Context, u intake.Update) error {
		mu.Lock()
		defer mu.Unlock()
		seen[u.ID] = bytes.Clone(u.Body)
		if len(seen) == n {
			close(all)
		}
		return nil
	}})
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wh)
	defer srv.Close()
	body := func(id int64) []byte {
		return fmt.Appendf(nil, `{"update_id":%d,"message":{"chat":{"id":%d},"text":"%s"}}`, id, id%7, strings.Repeat(strconv.FormatInt(id%10, 10), int(id%97)*13))
	}
	ids := make(chan int64, n)
	for id := int64(1); id <= n; id++ {
		ids <- id
	}
	close(ids)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for id := range ids {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(body(id)))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set(intake.SecretHeader, testSecret)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("update %d: status %d", id, resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	failsafe := time.NewTimer(time.Minute) // a hang's bound, not a measurement
	defer failsafe.Stop()
	select {
	case <-all:
	case <-failsafe.C:
		t.Fatal("the handler did not see every update")
	}
	mu.Lock()
	defer mu.Unlock()
	for id := int64(1); id <= n; id++ {
		want := body(id)
		if !bytes.Equal(seen[id], want) {
			t.Fatalf("handler saw update %d as %q, want %q", id, seen[id], want)
		}
		row, ok, err := store.Get(t.Context(), id)
		if err != nil || !ok || !bytes.Equal(row.Body, want) {
			t.Fatalf("stored update %d: %q (found %t, %v), want %q", id, row.Body, ok, err, want)
		}
	}
}
