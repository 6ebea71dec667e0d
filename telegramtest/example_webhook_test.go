package telegramtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// A bot behind a webhook: the server posts each update with the secret
// header, and re-delivers an update the bot failed to accept.
func Example_webhook() {
	srv := telegramtest.NewServer(telegramtest.Config{
		Webhook: telegramtest.WebhookConfig{Backoff: time.Millisecond}, // retry quickly in tests
	})
	defer srv.Close()

	got := make(chan string)
	failedOnce := false
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u struct {
			UpdateID int64 `json:"update_id"`
			Message  struct{ Text string }
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &u)
		if !failedOnce {
			failedOnce = true
			w.WriteHeader(http.StatusInternalServerError)
			got <- "refused " + u.Message.Text
			return
		}
		got <- "accepted " + u.Message.Text + " with secret " + r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
	}))
	defer bot.Close()

	resp, _ := srv.Client().PostForm(srv.URL+"/bot"+srv.Token+"/setWebhook",
		url.Values{"url": {bot.URL}, "secret_token": {"s3cret"}})
	resp.Body.Close()

	ada := srv.NewUser("Ada")
	chat, _ := srv.NewPrivateChat(ada)
	srv.SendText(chat, ada, "hello")
	fmt.Println(<-got)
	fmt.Println(<-got)
	srv.WaitIdle(context.Background()) // the second attempt is recorded once its answer arrived

	for _, d := range srv.Deliveries() {
		fmt.Printf("attempt %d: status %d %s\n", d.Attempt, d.Status, d.Err)
	}
	// Output:
	// refused hello
	// accepted hello with secret s3cret
	// attempt 1: status 500 Wrong response from the webhook: 500 Internal Server Error
	// attempt 2: status 200
}
