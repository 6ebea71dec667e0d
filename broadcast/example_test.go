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

// Inspect reads a broadcast's state without its lock and without writing:
// the counts, whether a runner holds it, and who must be checked by hand.
func ExampleInspect() {
	dir, err := os.MkdirTemp("", "broadcast-inspect")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	_, err = broadcast.Run(context.Background(), broadcast.Config{
		Name: "promo",
		Dir:  dir,
		AudienceFunc: func(context.Context) ([]broadcast.Recipient, error) {
			return []broadcast.Recipient{broadcast.ChatID(1), broadcast.ChatID(2), broadcast.ChatID(3)}, nil
		},
		SendFunc: func(ctx context.Context, r broadcast.Recipient) error {
			if r.ID == 2 {
				return broadcast.ErrInvalidRecipient // stands in for a lost connection
			}
			return nil
		},
		ClassifyFunc: func(err error) broadcast.Verdict { return broadcast.Ambiguous("connection-lost") },
		Rate:         1000,
		Concurrency:  1,
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := broadcast.Inspect(dir, "promo")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("running: %v, delivered %d, pending %d\n", st.Running, st.Delivered, st.Pending)
	fmt.Println("check by hand:", st.Uncertain)
	// Output:
	// running: false, delivered 1, pending 1
	// check by hand: [2]
}
