package broadcast_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/tgrelay/tgrelay/broadcast"
)

func Example() {
	dir, err := os.MkdirTemp("", "broadcast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := broadcast.Config{
		Name: "launch-2026-11",
		Dir:  dir,
		AudienceFunc: func(context.Context) ([]broadcast.Recipient, error) {
			return []broadcast.Recipient{broadcast.ChatID(1), broadcast.ChatID(2), broadcast.ChatID(2), broadcast.Username("@news_channel")}, nil
		},
		// In a real program: broadcast.Sender(client, broadcast.Message{Text: "…"}).
		SendFunc: func(ctx context.Context, r broadcast.Recipient) error {
			if r.ID == 2 {
				return broadcast.ErrInvalidRecipient // stands in for "bot was blocked"
			}
			return nil
		},
		ClassifyFunc: func(err error) broadcast.Verdict { return broadcast.Unreachable("blocked-by-user") },
		Rate:         1000,
	}
	rep, err := broadcast.Run(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d recipients, %d delivered, %d unreachable\n", rep.State, rep.Total, rep.Delivered, rep.Unreachable)

	// Running the same name again resumes it: nobody gets it twice.
	rep, err = broadcast.Run(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d pending\n", rep.State, rep.Pending)
	// Output:
	// finished: 3 recipients, 2 delivered, 1 unreachable
	// finished: 0 pending
}
