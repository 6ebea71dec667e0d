package pacedstats_test

import (
	"context"
	"fmt"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/pacedstats"
)

// Readers on a timer (a page's refresh, a scrape) share one paced count.
func Example() {
	ctx := context.Background()
	store := memstore.New()
	store.Add(ctx, intake.Incoming{UpdateID: 1, Body: []byte(`{"update_id":1}`)})

	counts := &pacedstats.Cache{Stats: store.Stats}
	st, _, err := counts.Get(ctx) // the first count is waited for
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pending:", st.Count[intake.StatePending])

	store.Add(ctx, intake.Incoming{UpdateID: 2, Body: []byte(`{"update_id":2}`)})
	st, _, _ = counts.Get(ctx) // within a second of the first: the same count
	fmt.Println("pending, reused:", st.Count[intake.StatePending])

	counts.Forget() // after a change its readers must see at once
	st, _, _ = counts.Get(ctx)
	fmt.Println("pending, counted again:", st.Count[intake.StatePending])
	// Output:
	// pending: 1
	// pending, reused: 1
	// pending, counted again: 2
}
