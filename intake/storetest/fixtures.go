package storetest

import (
	"context"

	"github.com/tgrelay/tgrelay/intake"
)

// Add records us in s through one [intake.Store.AddBatch], none of them
// claimed, and reports for each whether it was newly recorded: the
// fixtures of a test that needs rows in a store (a page, a command, a
// store's own tests).
func Add(ctx context.Context, s intake.Store, us []intake.Incoming) ([]bool, error) {
	reqs := make([]intake.AddRequest, len(us))
	for i, u := range us {
		reqs[i].Incoming = u
	}
	res, err := s.AddBatch(ctx, reqs)
	if err != nil {
		return nil, err
	}
	added := make([]bool, len(res))
	for i, r := range res {
		added[i] = r.Added
	}
	return added, nil
}
