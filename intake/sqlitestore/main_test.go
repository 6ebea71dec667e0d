package sqlitestore_test

import (
	"os"
	"testing"

	"github.com/tgrelay/tgrelay/internal/leakcheck"
)

func TestMain(m *testing.M) {
	// A copy of this binary started by TestTwoProcessesNeverBothWinAClaim
	// runs the claiming child and exits without running tests.
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(claimChild(path))
	}
	leakcheck.Main(m)
}
