package botapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
)

func FuzzParseResponse(f *testing.F) {
	f.Add(200, `{"ok":true,"result":{"message_id":1}}`)
	f.Add(429, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}`)
	f.Add(400, `{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1001}}`)
	f.Add(502, `<html>bad gateway</html>`)
	f.Add(500, `{"ok":false,"error_code":1e400}`)
	f.Add(200, `{"ok":"true"}`)
	f.Add(200, ` null `)
	f.Fuzz(func(t *testing.T, status int, body string) {
		result, err := botapi.ParseResponse("m", status, []byte(body), botapi.Redact)
		if err == nil {
			if result == nil {
				t.Fatal("nil result without an error")
			}
			return
		}
		var ae *botapi.APIError
		if !errors.As(err, &ae) {
			t.Fatalf("error %T is not an *APIError", err)
		}
		if ae.RetryAfter < 0 || ae.RetryAfter > botapi.MaxRetryAfter {
			t.Fatalf("RetryAfter %v out of range", ae.RetryAfter)
		}
		if ae.NotJSON && !strings.Contains(ae.Description, "not JSON") {
			t.Fatalf("NotJSON without saying so: %q", ae.Description)
		}
		_ = botapi.Classify(err)
	})
}
