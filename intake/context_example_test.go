package intake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A library whose handlers get only a context and return nothing (as
// go-telegram/bot's) finds its update with UpdateFrom and fails the
// attempt with ReportError; the runner retries the update.
func ExampleReportError() {
	// libraryHandler stands for a handler registered with such a library.
	libraryHandler := func(ctx context.Context) {
		u, _ := intake.UpdateFrom(ctx)
		a, _ := intake.AttemptFrom(ctx)
		fmt.Printf("update %d of chat %d, attempt %d\n", u.ID, u.ChatID, a.Attempt)
		if a.Attempt == 1 {
			intake.ReportError(ctx, errors.New("sendMessage failed"))
		}
	}
	r, err := intake.New(intake.Config{
		Store: memstore.New(),
		Handler: func(ctx context.Context, u intake.Update) error {
			libraryHandler(ctx) // as the library's ProcessUpdate would
			return nil
		},
		RetryFunc: func(error, int) (time.Duration, bool) { return 0, true },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	_ = r.Start(ctx)
	_, _ = r.Accept(ctx, []byte(`{"update_id":5,"message":{"chat":{"id":42,"type":"private"},"text":"hi"}}`))
	_ = r.Idle(ctx)
	_ = r.Close(ctx)
	// Output:
	// update 5 of chat 42, attempt 1
	// update 5 of chat 42, attempt 2
}
