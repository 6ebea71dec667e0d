package intake_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// With ChatOrderStrict, updates of one chat recorded by different runners
// sharing a store (processes behind one load balancer, on pgstore) are
// handled one at a time, in update id order: the store refuses a claim
// while an earlier update of the chat is unsettled, and the runner that
// settles an update hands its chat's next one on.
func ExampleConfig_chatOrder() {
	store := memstore.New() // pgstore, shared by every process, in production
	handled := make(chan int64, 4)
	newRunner := func() *intake.Runner {
		r, err := intake.New(intake.Config{
			Store:     store,
			ChatOrder: intake.ChatOrderStrict,
			Handler: func(ctx context.Context, u intake.Update) error {
				time.Sleep(10 * time.Millisecond) // some work
				handled <- u.ID
				return nil
			},
		})
		if err != nil {
			panic(err)
		}
		return r
	}
	ctx := context.Background()
	a, b := newRunner(), newRunner()
	for _, r := range []*intake.Runner{a, b} {
		if err := r.Start(ctx); err != nil {
			fmt.Println(err)
			return
		}
		defer r.Close(ctx)
	}
	for id := int64(1); id <= 4; id++ {
		r := a
		if id%2 == 0 {
			r = b // the load balancer sends every other update elsewhere
		}
		if _, err := r.Accept(ctx, fmt.Appendf(nil, `{"update_id":%d,"message":{"chat":{"id":7},"text":"%d"}}`, id, id)); err != nil {
			fmt.Println(err)
			return
		}
	}
	for range 4 {
		fmt.Println(<-handled)
	}
	// Output:
	// 1
	// 2
	// 3
	// 4
}
