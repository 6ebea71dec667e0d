// Command bench runs tgrelay side by side with the alternative a user would
// otherwise pick, alternately in one run, and prints a table and a last line
//
//	RESULT <scenario> key=value ...
//
// Usage:
//
//	go run ./bench <scenario> [flags]
//
// Scenarios are listed by running it without arguments. BENCHMARKS.md records
// the latest results and what they mean.
package main

import (
	"context"
	"errors"
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
	"intake-accept":   {"100 clients POST updates to the webhook: group commit vs one transaction per update vs a non-durable channel", runIntakeAccept},
	"intake-process":  {"claim, no-op handler, settle through the runner vs the raw SQL loop", runIntakeProcess},
	"transport":       {"sendMessage-sized POSTs over TLS: tgrelay transport vs http.DefaultClient vs connection-per-request", runTransport},
	"happy-eyeballs":  {"first address black-holed: time to connect, tgrelay dialer vs net.Dialer", runHappyEyeballs},
	"broadcast-rate":  {"10,000 recipients at 30/s and 1000/s with 100 ms latency: windowed vs one-at-a-time", runBroadcastRate},
	"deadlines":       {"callback and pre-checkout queries among slow messages that saturate the app: share answered within Telegram's deadlines, serve with its deadlines vs every update alike", runDeadlines},
	"gateway":         {"32 concurrent sendMessage, limits off: directly vs a bare reverse proxy vs through the gateway, without and with an attempt identity (journal on SQLite FULL)", runGateway},
	"gateway-flood":   {"32 workers flood 40 private chats and 10 groups through serve's gateway at Telegram's real limits: app 429s, calls without an answer, order, wall time vs the limits' minimum, a quiet chat's wait", runGatewayFlood},
	"relay":           {"updates/s through tgrelay serve vs a non-durable forwarder and the durable floor (that forwarder plus a group-committed row and its settlement)", runRelay},
	"relay-forwarder": {"(started by relay) its non-durable forwarder as a process of its own", runRelayForwarder},
	"relay-scale":     {"1, 2 and 3 serve on one PostgreSQL behind a round-robin proxy: updates/s, relay vs PostgreSQL CPU, takeover after a SIGKILL", runRelayScale},
	"chat-order":      {"three serve on one PostgreSQL, 20 chats: overtaken and overlapping forwards with --chat-order process vs strict, and strict under SIGKILLs (strict must be 0)", runChatOrder},
	"relay-latency":   {"receive→forward latency at 100/s and 1,000/s (open loop): tgrelay serve vs a non-durable forwarder, beside this disk's fsync", runRelayLatency},
	"broadcast-cli":   {"tgrelay broadcast run as a process to 3,000 recipients at --rate 1000, limits off: the rate reached, optionally on fewer CPUs (-cpus) and against a second build", runBroadcastCLI},
	"crash-broadcast": {"2,000-recipient broadcast killed with SIGKILL 10+ times and resumed: chats reached twice (must be 0 unless uncertain)", runCrashBroadcast},
	"crash-payments":  {"serve on PostgreSQL forwards successful_payment updates to examples/payments; serve and the app killed with SIGKILL in turn: payments lost or fulfilled twice (must be 0)", runCrashPayments},
	"crash-pg":        {"three serve on one PostgreSQL behind a proxy, fenced writes, random SIGKILLs: lost and double effects (must be 0)", runCrashPG},
	"soak":            {"serve with its gateway under a steady 200 updates/s for -duration (SQLite and PostgreSQL), short retention: RSS, goroutines, fds, rows and p99 over time, lost and replies sent twice (must be 0)", runSoak},
	"pg-stall":        {"serve on PostgreSQL through a proxy that stops forwarding bytes for 30 s, then the same for the app: how long webhook POSTs are held, what they get, recovery, lost (must be 0)", runPGStall},
	"pg-failover":     {"serve on a PostgreSQL primary with a synchronous standby (multi-host URL), primary SIGKILLed and standby promoted under load: lost (must be 0), double effects, 503s, recovery time", runPGFailover},
	"crash-serve":     {"serve on SQLite killed with SIGKILL 15+ times under load: lost (must be 0), duplicates, drain", runCrashServe},
	"peer-river":      {"tgrelay's intake vs River's Insert and InsertMany on PostgreSQL and SQLite; its own module: go -C bench/peer run . peer-river", runPeerElsewhere},
}

// runPeerElsewhere points at bench/peer: the benchmarks against other
// projects are a module of their own, so that those projects never enter
// the library's dependency graph.
func runPeerElsewhere(context.Context, []string, io.Writer) error {
	return errors.New("peer benchmarks are their own module: run go -C bench/peer run . peer-river [flags] from the repository's root")
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
		fmt.Fprintf(os.Stderr, "bench: unknown scenario %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	if err := s.run(ctx, os.Args[2:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run ./bench <scenario> [flags]")
	fmt.Fprintln(w, "\nscenarios:")
	names := make([]string, 0, len(scenarios))
	for name := range scenarios {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-16s %s\n", name, scenarios[name].about)
	}
}
