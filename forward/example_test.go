package forward_test

import (
	"log"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A relay in front of a bot written in any language: every stored update is
// POSTed to the bot's endpoint with its claim identity, and exhaustions to a
// second endpoint.
func Example() {
	f, err := forward.New(forward.Config{
		URL:           "http://127.0.0.1:3000/telegram",
		ExhaustionURL: "http://127.0.0.1:3000/telegram/exhausted",
	})
	if err != nil {
		log.Fatal(err)
	}
	r, err := intake.New(intake.Config{
		Store:             memstore.New(),
		AttemptHandler:    f.Handle,
		ExhaustionHandler: f.HandleExhaustion,
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = r // serve intake.NewWebhook(intake.WebhookConfig{Runner: r, Secret: ...}) and r.Start(ctx)
}
