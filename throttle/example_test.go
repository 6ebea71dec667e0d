package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
)

// A Bot API client whose every call keeps Telegram's limits: hand the
// http.Client to any library (go-telegram/bot's WithHTTPClient, telego,
// botapi.Config.HTTPClient).
func Example() {
	tg := telegramtest.NewServer(telegramtest.Config{}) // Telegram's limits
	defer tg.Close()
	chat, _ := tg.NewPrivateChat(tg.NewUser("Ada"))

	l, err := throttle.New(throttle.Config{Chat: throttle.Limit{Count: 1, Per: time.Second}})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: throttle.NewTransport(l, nil)}

	for i := range 3 { // 1/s in one chat: the 2nd and 3rd wait their turn
		body := fmt.Sprintf(`{"chat_id":%d,"text":"hello %d"}`, chat.ID, i)
		resp, err := client.Post(tg.URL+"/bot"+tg.Token+"/sendMessage", "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	fmt.Println(len(tg.MessagesTo(chat.ID)), "messages, no 429")
	// Output:
	// 200 OK
	// 200 OK
	// 200 OK
	// 3 messages, no 429
}

// Senders that are not HTTP clients (a broadcast, an alert channel) ask the
// limiter directly and tell it how the call ended.
func ExampleLimiter_Wait() {
	l, _ := throttle.New(throttle.Config{})
	ctx := context.Background()

	p, err := l.Wait(ctx, "sendMessage", -1001234567890)
	var werr *throttle.WaitError
	if errors.As(err, &werr) {
		fmt.Println("not within MaxWait; retry after", werr.RetryAfter)
		return
	}
	// ... send the message; then:
	p.Done() // answered (or unknown): counts as sent now
	// p.Retry(ctx, retryAfter) after Telegram's 429, p.Cancel() if never sent
	fmt.Println("sent")
	// Output: sent
}
