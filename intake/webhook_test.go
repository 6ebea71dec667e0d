package intake_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
)

const testSecret = "s3cr3t-Token_value"

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type webhookBundle struct {
	store *faultStore
	srv   *httptest.Server
	logs  *syncBuffer
}

func setupWebhook(t *testing.T, cfg intake.WebhookConfig) *webhookBundle {
	t.Helper()
	b := &webhookBundle{store: newFaultStore(), logs: &syncBuffer{}}
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
		{"no runner", intake.WebhookConfig{Secret: testSecret}, "WebhookConfig.Runner"},
		{"no secret", intake.WebhookConfig{Runner: r}, "WebhookConfig.Secret is required"},
		{"bad secret shape", intake.WebhookConfig{Runner: r, Secret: "has space"}, "WebhookConfig.Secret must be"},
		{"secret too long", intake.WebhookConfig{Runner: r, Secret: strings.Repeat("a", 257)}, "WebhookConfig.Secret must be"},
		{"secret and insecure", intake.WebhookConfig{Runner: r, Secret: testSecret, InsecureNoSecret: true}, "both set"},
		{"negative body limit", intake.WebhookConfig{Runner: r, Secret: testSecret, MaxBodyBytes: -1}, "WebhookConfig.MaxBodyBytes is -1"},
		{"huge body limit", intake.WebhookConfig{Runner: r, Secret: testSecret, MaxBodyBytes: intake.MaxMaxBodyBytes + 1}, "WebhookConfig.MaxBodyBytes"},
	} {
		_, err := intake.NewWebhook(tc.cfg)
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
