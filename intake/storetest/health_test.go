package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// neverHealthy serves like a memstore but reports itself unhealthy, as a
// health check whose query always fails would.
type neverHealthy struct{ *memstore.Store }

func (neverHealthy) Health(context.Context) error { return errors.New("health query failed") }

func TestNeverHealthyFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return neverHealthy{m} }), "Add")
	requireCases(t, res, "Add/HealthyWhileServing")
	requireMessage(t, res, "Add/HealthyWhileServing", "Health of a fresh store = health query failed; want nil")
}
