// Package leakcheck fails a test binary that leaves goroutines behind.
//
// Call it from TestMain in every package that starts goroutines:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
//
// After the tests pass, Main waits (bounded) for the goroutines the tests
// started to end, and fails the binary, printing their stacks, if some remain.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// DefaultWait is how long Main waits for stray goroutines to end.
const DefaultWait = 5 * time.Second

// ignored lists stack fragments of goroutines that belong to the runtime, the
// testing package or long-lived pools of the standard library and our
// drivers, not to the code under test.
var ignored = []string{
	"testing.Main(",
	"testing.tRunner(",
	"testing.(*M).",
	"testing.(*T).Run(",
	"testing.(*F).Fuzz(",
	"runtime.goexit",
	"created by runtime.gc",
	"runtime.MHeap_Scavenger",
	"signal.signal_recv",
	"os/signal.loop",
	"sigterm.handler",
	"interestingGoroutines",
	"database/sql.(*DB).connectionOpener",
	"modernc.org/libc",
}

// Main runs the tests and then the leak check, and exits.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := Wait(DefaultWait); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: %d goroutine(s) still running after the tests:\n\n%s\n",
				len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// Wait polls until no goroutine other than the ignored ones runs, or until
// wait passes, and returns the stacks of those still running.
func Wait(wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		leaked := running()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond) // polling the runtime; there is no signal to wait on
	}
}

func running() []string {
	buf := make([]byte, 2<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		g = strings.TrimSpace(g)
		if g == "" || strings.Contains(g, "leakcheck.running") {
			continue
		}
		stack := g
		if i := strings.Index(g, "\n"); i >= 0 {
			stack = g[i+1:]
		}
		if slices.ContainsFunc(ignored, func(s string) bool { return strings.Contains(stack, s) }) {
			continue
		}
		out = append(out, g)
	}
	return out
}
