package memstore_test

import (
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

func TestInspect(t *testing.T) {
	t.Parallel()
	storetest.RunInspect(t, func(*testing.T) intake.Store { return memstore.New() })
}
