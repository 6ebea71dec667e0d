package relay_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/relay"
)

// A Go program runs the whole sidecar in its own process: receive the
// bot's webhook, record every update in SQLite, forward each one to the
// bot's endpoint, and stop in order on SIGTERM.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	store, err := sqlitestore.Open(ctx, "tgrelay.db", sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // after Run returned: the relay never closes it

	r, err := relay.New(relay.Config{
		Token:     "123456:the-token-BotFather-gave-you-xxxxxxxx",
		Store:     store,
		Secret:    "a-long-random-webhook-secret",
		PublicURL: "https://bot.example.org/telegram",
		Listen:    "127.0.0.1:8080",
		Forward:   forward.Config{URL: "http://127.0.0.1:3000/telegram-update"},
		Observer: relay.Observer{EventFunc: func(e relay.Event) {
			if e.Kind == relay.KindExhausted {
				fmt.Println("given up:", e.ID.UpdateID, e.Err)
			}
		}},
	})
	if err != nil {
		log.Fatal(err) // a *relay.ConfigError names the field
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
