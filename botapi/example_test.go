package botapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/tgrelay/tgrelay/botapi"
)

// Example calls sendMessage against a stand-in for the Bot API that refuses
// with a 429, and classifies the refusal.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}`)
	}))
	defer srv.Close()

	client, err := botapi.New("123456789:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", botapi.Config{APIRoot: srv.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.Call(context.Background(), "sendMessage", map[string]any{"chat_id": 42, "text": "hello"})
	fmt.Println(err)

	var apiErr *botapi.APIError
	if errors.As(err, &apiErr) {
		fmt.Println("retry after:", apiErr.RetryAfter)
	}
	f := botapi.Classify(err)
	fmt.Println(f.Reason, f.Retryable, f.Evidence)
	// Output:
	// telegram: sendMessage failed: 429 Too Many Requests: retry after 5
	// retry after: 5s
	// rate-limited true parameters
}

// ExampleRedact masks the secret half of a bot token in any text.
func ExampleRedact() {
	fmt.Println(botapi.Redact("GET /bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq/getMe"))
	// Output: GET /bot123456789:[redacted]/getMe
}
