package memstore_test

import (
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

// TestConformance runs the store contract's conformance suite at the
// durable level, with the batch and admin capabilities.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) intake.Store { return memstore.New() })
}
