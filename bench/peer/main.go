// Command peer runs tgrelay side by side with another project a Go developer
// would otherwise pick, alternately in one run, and prints a table and a
// last line
//
//	RESULT <scenario> key=value ...
//
// It is its own module, so that the peers it measures never enter the
// library's dependency graph: run it from this directory,
//
//	cd bench/peer && go run . peer-river [flags]
//
// or from the repository's root with go -C bench/peer run . peer-river.
// BENCHMARKS.md records the latest results and what they mean.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
)

// scenario runs one benchmark, writing its table and RESULT line to out.
type scenario struct {
	about string
	run   func(ctx context.Context, args []string, out io.Writer) error
}

var scenarios = map[string]scenario{
	"peer-river": {"20,000 items from 64 producers, each recorded durably, then worked by a no-op handler on 32 workers: tgrelay's intake vs River's Insert and InsertMany, on PostgreSQL and SQLite", runPeerRiver},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	s, ok := scenarios[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "peer: unknown scenario %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	if err := s.run(ctx, os.Args[2:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "peer %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run . <scenario> [flags]   (in bench/peer)")
	fmt.Fprintln(w, "\nscenarios:")
	names := make([]string, 0, len(scenarios))
	for name := range scenarios {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-12s %s\n", name, scenarios[name].about)
	}
}
