package intake_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A Runner records each update before answering and handles it afterwards,
// in chat order.
func Example() {
	var (
		mu      sync.Mutex
		handled []string
	)
	r, err := intake.New(intake.Config{
		Store: memstore.New(), // sqlitestore or pgstore in production
		Handler: func(ctx context.Context, u intake.Update) error {
			var upd struct {
				Message struct {
					Text string `json:"text"`
				} `json:"message"`
			}
			if err := u.Decode(&upd); err != nil {
				return intake.Abandon(err) // repeating cannot fix a body we cannot read
			}
			mu.Lock()
			handled = append(handled, fmt.Sprintf("update %d: %s", u.ID, upd.Message.Text))
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for _, body := range []string{
		`{"update_id":1,"message":{"chat":{"id":7},"text":"hello"}}`,
		`{"update_id":2,"message":{"chat":{"id":7},"text":"world"}}`,
		`{"update_id":1,"message":{"chat":{"id":7},"text":"hello"}}`,
		`{"message":{"text":"no update_id"}}`,
	} {
		a, err := r.Accept(ctx, []byte(body))
		fmt.Println(a, err)
	}
	_ = r.Idle(ctx)
	_ = r.Close(ctx)
	fmt.Println(strings.Join(handled, "\n"))
	// Output:
	// accepted <nil>
	// accepted <nil>
	// duplicate <nil>
	// invalid <nil>
	// update 1: hello
	// update 2: world
}

// The Webhook answers Telegram only once the update is recorded.
func ExampleNewWebhook() {
	r, err := intake.New(intake.Config{
		Store:   memstore.New(),
		Handler: func(ctx context.Context, u intake.Update) error { return nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close(context.Background())
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, Secret: "my-secret-token"})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("POST /telegram", wh)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(secret, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/telegram", strings.NewReader(body))
		req.Header.Set(intake.SecretHeader, secret)
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	post("my-secret-token", `{"update_id":10,"message":{"chat":{"id":1},"text":"hi"}}`)
	post("my-secret-token", `{"update_id":10,"message":{"chat":{"id":1},"text":"hi"}}`)
	post("my-secret-token", `{"update_id":"10"}`)
	post("wrong", `{"update_id":11}`)
	// Output:
	// 200
	// 200
	// 400
	// 403
}

// An attempt-aware handler gets the fenced identity of its attempt, to
// store with its domain write and to check with the store's Owns in the
// same transaction.
func ExampleConfig_attemptHandler() {
	r, err := intake.New(intake.Config{
		Store: memstore.New(),
		AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
			fmt.Printf("update %d attempt %d, claim id set: %v, lease ahead: %v\n",
				a.UpdateID, a.Attempt, a.ClaimID != "", time.Until(a.LeaseUntil()) > 0)
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	_ = r.Start(ctx)
	_, _ = r.Accept(ctx, []byte(`{"update_id":3,"message":{"chat":{"id":1}}}`))
	_ = r.Idle(ctx)
	_ = r.Close(ctx)
	// Output:
	// update 3 attempt 1, claim id set: true, lease ahead: true
}
