package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// The whole sidecar, offline: telegramtest plays Telegram, a temporary
// SQLite file records the updates, and the bot's app is an HTTP handler
// that answers each update by calling the Bot API at the root the relay
// announces for it, so its reply goes through the relay's gateway, fenced
// by the update's attempt.
func Example() {
	tg := telegramtest.NewServer(telegramtest.Config{})
	defer tg.Close()
	ann := tg.NewUser("Ann")
	chat, _ := tg.NewPrivateChat(ann)

	// The bot's app, in any language: read the update, reply through the
	// announced API root, answer 2xx to complete it (5xx to have it retried).
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u struct {
			Message struct {
				Text string
				Chat struct{ ID int64 }
			}
		}
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			http.Error(w, "bad update", http.StatusBadRequest) // a 4xx gives the update up
			return
		}
		bot, err := botapi.New(tg.Token, botapi.Config{APIRoot: r.Header.Get("Tgrelay-Api-Root")})
		if err == nil {
			_, err = bot.Call(r.Context(), "sendMessage", map[string]any{"chat_id": u.Message.Chat.ID, "text": "you said: " + u.Message.Text})
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable) // retried later
		}
	}))
	defer app.Close()

	dir, _ := os.MkdirTemp("", "tgrelay-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "tgrelay.db"), sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // after Run returned: the relay never closes it

	r, err := relay.New(relay.Config{
		Token:   tg.Token,
		APIRoot: tg.URL, // telegramtest instead of api.telegram.org
		Store:   store,
		Poll:    true, // long polling: no public address needed
		Forward: forward.Config{URL: app.URL},
	})
	if err != nil {
		log.Fatal(err) // a *relay.ConfigError names the field
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	if _, err := tg.SendText(chat, ann, "hello"); err != nil {
		log.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	msgs, err := tg.WaitMessages(wait, chat.ID, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(msgs[0].Text)

	cancel() // stop receiving, drain, stop in order
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: you said: hello
}

// In production the relay receives the bot's webhook, records every update
// in SQLite, forwards each one to the bot's endpoint, and stops in order on
// SIGTERM. tgrelay serve is this program with flags.
func Example_webhook() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	store, err := sqlitestore.Open(ctx, "tgrelay.db", sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // after Run returned: the relay never closes it

	r, err := relay.New(relay.Config{
		Token:     os.Getenv("TGRELAY_TOKEN"),
		Store:     store,
		Secret:    os.Getenv("TGRELAY_WEBHOOK_SECRET"),
		PublicURL: "https://bot.example.org/telegram", // behind a TLS proxy forwarding to Listen
		Listen:    "127.0.0.1:8080",
		Forward:   forward.Config{URL: "http://127.0.0.1:3000/telegram-update"},
		Observer: relay.Observer{EventFunc: func(e relay.Event) {
			if e.Kind == relay.KindExhausted {
				log.Printf("given up: update %d: %v", e.ID.UpdateID, e.Err)
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
