package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRunSends(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/sendMessage") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"result":{"message_id":77,"date":0,"chat":{"id":42,"type":"private"}}}`)
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-chat", "42", "-api-root", srv.URL}, "123:abc", &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := out.String(); got != "sent message 77\n" {
		t.Errorf("output = %q", got)
	}
}

// TestRunRefusedIsNotDispatched: a refused connection travels through
// go-telegram/bot's error wrapping and is still recognised as not dispatched.
func TestRunRefusedIsNotDispatched(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	root := srv.URL
	srv.Close()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-chat", "42", "-api-root", root}, "123:abc", &out); err == nil {
		t.Fatal("want an error")
	}
	if got := out.String(); !strings.Contains(got, "reason=not-dispatched retryable=true evidence=transport") {
		t.Errorf("output = %q, want a not-dispatched verdict", got)
	}
}
