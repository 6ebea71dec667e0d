package main

import (
	"bytes"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/telegramtest"
)

func TestWebhookOwnership(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(telegramtest.Config{Logf: t.Logf})
	t.Cleanup(srv.Close)
	const (
		secretA = "secret_A_1234"
		secretB = "secret_B_5678"
		// Nothing listens there; no update is sent, so nothing is delivered.
		urlA = "http://127.0.0.1:9/hook/path-a"
		urlB = "http://127.0.0.2:9/hook/path-b"
	)
	wh := func(args ...string) (string, error) {
		t.Helper()
		var buf bytes.Buffer
		err := runWebhook(t.Context(), append(args, "--token", srv.Token, "--api-root", srv.URL), &buf, &buf)
		out := buf.String()
		if err != nil {
			out += err.Error()
		}
		for _, secret := range []string{srv.Token, secretA, secretB} {
			if strings.Contains(out, secret) {
				t.Errorf("%v: output contains a secret:\n%s", args, out)
			}
		}
		return out, err
	}

	// No webhook yet: setting one takes over from "none", which must be named.
	out, err := wh("set", "--url", urlA, "--secret", secretA)
	if err == nil || !strings.Contains(out, "belongs to none") || !strings.Contains(out, "--takeover-from none") {
		t.Fatalf("set without takeover: %v\n%s", err, out)
	}
	out, err = wh("set", "--url", urlA, "--secret", secretA, "--takeover-from", "none")
	if err != nil || !strings.Contains(out, "taken over from none") || !strings.Contains(out, "webhook set: "+urlA+"?owner=") {
		t.Fatalf("set with takeover: %v\n%s", err, out)
	}
	// Setting it again with the same secret needs no takeover.
	if out, err = wh("set", "--url", urlA, "--secret", secretA); err != nil || strings.Contains(out, "taken over") {
		t.Fatalf("set again: %v\n%s", err, out)
	}
	if out, err = wh("check", "--url", urlA, "--secret", secretA); err != nil || !strings.Contains(out, "webhook is ours") {
		t.Fatalf("check: %v\n%s", err, out)
	}

	// Another deployment (secret B, another host) is refused with host only.
	out, err = wh("set", "--url", urlB, "--secret", secretB)
	if err == nil || !strings.Contains(out, "refused: the webhook belongs to 127.0.0.1:9") || strings.Contains(out, "path-a") {
		t.Fatalf("set by another owner: %v\n%s", err, out)
	}
	// The same address with another secret is refused too.
	out, err = wh("set", "--url", urlA, "--secret", secretB)
	if err == nil || !strings.Contains(out, "another secret") {
		t.Fatalf("set with another secret: %v\n%s", err, out)
	}
	// Deleting with the wrong secret is refused.
	if out, err = wh("delete", "--secret", secretB); err == nil || !strings.Contains(out, "refused") {
		t.Fatalf("delete by another owner: %v\n%s", err, out)
	}
	// Named takeover succeeds; then A's check fails and names B's host only.
	if out, err = wh("set", "--url", urlB, "--secret", secretB, "--takeover-from", "127.0.0.1:9"); err != nil || !strings.Contains(out, "taken over from 127.0.0.1:9") {
		t.Fatalf("takeover: %v\n%s", err, out)
	}
	out, err = wh("check", "--url", urlA, "--secret", secretA)
	if err == nil || !strings.Contains(out, "NOT ours: it points to 127.0.0.2:9") || strings.Contains(out, "path-b") {
		t.Fatalf("check after takeover: %v\n%s", err, out)
	}
	if out, err = wh("delete", "--secret", secretB); err != nil || !strings.Contains(out, "webhook deleted") {
		t.Fatalf("delete by the owner: %v\n%s", err, out)
	}
	if out, _ = wh("check", "--url", urlB, "--secret", secretB); !strings.Contains(out, "points to none") {
		t.Errorf("check after delete:\n%s", out)
	}
}

func TestWebhookUsage(t *testing.T) {
	t.Parallel()
	tok := "123456:" + strings.Repeat("A", 35)
	for _, args := range [][]string{
		{},
		{"frob", "--secret", "s"},
		{"set", "--secret", "s"},
		{"check", "--secret", "s"},
		{"check", "--url", "http://x/", "--secret", "s", "--takeover-from", "h"},
		{"set", "--url", "http://x/", "--secret", "bad secret!"},
		{"set", "delete", "--url", "http://x/", "--secret", "s"},
	} {
		var buf bytes.Buffer
		err := runWebhook(t.Context(), append(args, "--token", tok, "--api-root", "http://127.0.0.1:9"), &buf, &buf)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}

func TestWebhookSetUploadsCertificate(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(telegramtest.Config{Logf: t.Logf})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	certPath := filepath.Join(dir, "cert.pem")
	newTLSTestCA(t, "203.0.113.9").writeLeaf(t, "203.0.113.9", certPath, filepath.Join(dir, "key.pem"))
	var buf bytes.Buffer
	err := runWebhook(t.Context(), []string{"set", "--url", "https://203.0.113.9:8443/hook", "--secret", "secret_A_1234",
		"--takeover-from", "none", "--certificate", certPath, "--token", srv.Token, "--api-root", srv.URL}, &buf, &buf)
	if err != nil {
		t.Fatalf("set: %v\n%s", err, buf.String())
	}
	raw, err := serveBotClient(t, srv).Call(t.Context(), "getWebhookInfo", nil)
	if err != nil || !strings.Contains(string(raw), `"has_custom_certificate":true`) {
		t.Fatalf("getWebhookInfo = %s, %v; want the uploaded certificate", raw, err)
	}
	err = runWebhook(t.Context(), []string{"check", "--url", "https://203.0.113.9:8443/hook", "--secret", "secret_A_1234",
		"--certificate", certPath, "--token", srv.Token, "--api-root", srv.URL}, &buf, &buf)
	if ue, ok := errors.AsType[*usageError](err); !ok || !strings.Contains(ue.msg, "--certificate applies to set") {
		t.Errorf("check --certificate: %v", err)
	}
}

// TestWebhookSetMasksTheURL: a --url that carries the bot token or the
// webhook secret (a secret path, a token in the query) is printed with
// them masked, as the help promises ("Neither is ever printed").
func TestWebhookSetMasksTheURL(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(telegramtest.Config{Logf: t.Logf})
	t.Cleanup(srv.Close)
	const secret = "secret_in_the_path_1234"
	var buf bytes.Buffer
	err := runWebhook(t.Context(), []string{"set", "--url", "http://127.0.0.1:9/hook/" + secret + "?t=" + srv.Token, "--secret", secret,
		"--takeover-from", "none", "--token", srv.Token, "--api-root", srv.URL}, &buf, &buf)
	out := buf.String()
	if err != nil {
		t.Fatalf("set: %v\n%s", err, out)
	}
	if !strings.Contains(out, "webhook set: http://127.0.0.1:9/hook/") {
		t.Errorf("set does not print the address:\n%s", out)
	}
	_, tokenSecret, _ := strings.Cut(srv.Token, ":")
	for _, s := range []string{secret, tokenSecret, url.QueryEscape(srv.Token)} {
		if strings.Contains(out, s) {
			t.Errorf("the output shows %q:\n%s", s, out)
		}
	}
}
