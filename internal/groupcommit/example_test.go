package groupcommit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// A Group in front of a store's batch write: concurrent callers share one
// commit; a lone caller commits at once.
func Example() {
	g := &groupcommit.Group[string, int]{
		CommitFunc: func(_ context.Context, batch []string) ([]int, error) {
			// One transaction and one fsync for the whole batch.
			out := make([]int, len(batch))
			for i, s := range batch {
				out[i] = len(s)
			}
			return out, nil
		},
		Max:   100,
		Bound: time.Second,
	}
	n, err := g.Do(context.Background(), "hello")
	fmt.Println(n, err)
	// Output: 5 <nil>
}
