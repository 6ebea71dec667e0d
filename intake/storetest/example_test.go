package storetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

// A store author runs the suite from a test in the store's own package,
// for example in mystore/conformance_test.go:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) intake.Store {
//			s, err := mystore.Open(filepath.Join(t.TempDir(), "intake.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// and runs it with go test -race. Each case gets a fresh store; the log
// names the capability level detected and the cases skipped.
func ExampleRun() {
	conformance := func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) intake.Store {
			return memstore.New()
		})
	}
	_ = conformance // a TestXxx function in a real _test.go file
}

// Check runs the same cases without a *testing.T and returns every
// violation, joined; nil means the store conforms.
func ExampleCheck() {
	err := storetest.Check(context.Background(), func() (intake.Store, error) {
		return memstore.New(), nil
	})
	fmt.Println("violations:", err)
	// Output: violations: <nil>
}
