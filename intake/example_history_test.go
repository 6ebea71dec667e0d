package intake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// An update that failed once and then completed keeps both attempts, each
// with what its handler reported of the app's answer.
func ExampleHistory() {
	ctx := context.Background()
	store := memstore.New()
	calls := 0
	completed := make(chan struct{})
	r, err := intake.New(intake.Config{
		Store:     store,
		RetryFunc: func(error, int) (time.Duration, bool) { return time.Millisecond, true },
		Handler: func(ctx context.Context, u intake.Update) error {
			calls++
			if calls == 1 {
				intake.ReportAnswer(ctx, intake.AttemptAnswer{Status: 503, Body: []byte("busy")})
				return errors.New("the app answered 503")
			}
			intake.ReportAnswer(ctx, intake.AttemptAnswer{Status: 200})
			return nil
		},
		Observer: intake.Observer{SettleFunc: func(_ intake.Identity, st intake.State) {
			if st == intake.StateCompleted {
				close(completed) // its attempt is recorded by now
			}
		}},
	})
	if err != nil {
		panic(err)
	}
	if err := r.Start(ctx); err != nil {
		panic(err)
	}
	defer r.Close(ctx)
	if _, err := r.Accept(ctx, []byte(`{"update_id":1,"message":{"chat":{"id":7},"text":"hi"}}`)); err != nil {
		panic(err)
	}
	<-completed
	steps, _, _, err := intake.History(ctx, store, 1)
	if err != nil {
		panic(err)
	}
	for _, s := range steps {
		fmt.Printf("attempt %d: %s, app answered %d %q, error %q\n", s.Attempt, s.Outcome, s.Status, s.Body, s.Error)
	}
	// Output:
	// attempt 1: failed, app answered 503 "busy", error "the app answered 503"
	// attempt 2: completed, app answered 200 "", error ""
}
