package poll_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/poll"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
)

// Example long-polls a fake Bot API into an intake runner: each update is
// recorded before the offset moves past it, then handled.
func Example() {
	srv := telegramtest.NewServer(telegramtest.Config{})
	defer srv.Close()
	user := srv.NewUser("Ada")
	chat, _ := srv.NewPrivateChat(user)
	srv.SendText(chat, user, "hello")

	hc, _ := transport.NewClient(transport.Config{MaxResponseBytes: 8 << 20})
	defer hc.CloseIdleConnections()
	client, _ := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: hc})

	handled := make(chan string, 1)
	runner, _ := intake.New(intake.Config{
		Store: memstore.New(),
		Handler: func(ctx context.Context, u intake.Update) error {
			var m struct {
				Message struct{ Text string } `json:"message"`
			}
			if err := u.Decode(&m); err != nil {
				return intake.Abandon(err)
			}
			handled <- m.Message.Text
			return nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	_ = runner.Start(ctx)

	recorded := make(chan int, 1)
	p, _ := poll.New(poll.Config{
		Caller: client, AcceptFunc: runner.Accept, Timeout: time.Second,
		Observer: poll.Observer{BatchFunc: func(n int, next int64) { recorded <- n }},
	})
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	fmt.Println("recorded:", <-recorded)
	fmt.Println("handled:", <-handled)
	cancel()
	fmt.Println("run:", <-done)
	_ = runner.Close(context.Background())
	fmt.Println("left at Telegram:", srv.PendingUpdates())
	// Output:
	// recorded: 1
	// handled: hello
	// run: <nil>
	// left at Telegram: 0
}
