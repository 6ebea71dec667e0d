package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// Defaults of the relay scenario.
const (
	relayDefaultUpdates = 2000
	relayDefaultRounds  = 3
	// relayDefaultConns is Telegram's default max_connections: how many
	// webhook requests it keeps in flight at once.
	relayDefaultConns = 40
	relayDefaultChats = 200
	// relayRunTimeout bounds one measured run.
	relayRunTimeout = 2 * time.Minute
	// relaySecret is the webhook secret of every variant.
	relaySecret = "bench_relay_secret"
	// relayGoal is the target ratio of serve's rate to the non-durable
	// forwarder's.
	relayGoal = 0.5
	// relayWebhookPath is serve's and the baseline's webhook path.
	relayWebhookPath = "/telegram"
)

// runRelay measures updates per second from a webhook load generator through
// `tgrelay serve` (child processes of the built binary, SQLite and
// PostgreSQL) to a forward endpoint, alternating with a non-durable forwarder
// (an in-process handler that forwards each webhook request straight to the
// same endpoint before answering, storing nothing).
//
// The load generator plays Telegram: -conns concurrent connections POST
// Telegram-shaped updates (spread over -chats chats) with the secret header,
// and re-post any update not answered 200, as Telegram re-delivers. It
// posts straight to the webhook over loopback rather than through
// telegramtest's webhook delivery, so the sandbox's own cost (one delivery
// at a time per chat, its ledger) does not cap what is measured: the goal is
// serve. A run ends when the endpoint has received every update at least
// once; the rate is updates / that time.
//
// What bounds serve here is the store and the machine's CPU: an update
// the runner can take at once costs one batched insert, recorded already
// claimed (claim on add), and its settlement, batched with the others of
// its transaction (on SQLite, under load, in the next batch of adds'
// transaction); one that finds its chat busy costs a claim write too.
// -bin-b runs a second build beside the first (serve-sqlite-b,
// serve-postgres-b), to compare two versions in one run.
//
// The floor variants (floor-sqlite, floor-postgres; -floor) are the
// non-durable forwarder plus the least durable work a relay cannot avoid: the
// update's row, group committed before the 200 with serve's settings, and
// its settlement, group committed after the forward (see relayFloor). They
// forward as serve does, through forward.Forwarder (-floor-forward=serve,
// the default), so serve and its floors differ only in what happens
// between the webhook and the forward; -floor-forward=net/http forwards
// through net/http's client instead, as the non-durable forwarder does.
// Their ratio to the non-durable forwarder is the ceiling of any durable
// design on this machine, and serve is reported against them too. With
// -forwarder-proc the forwarder and the floors run once more each as a
// process of its own (relay-forwarder), as serve is: what the process
// boundary costs, and the floor of a durable sidecar. -memory adds serve
// with its updates in memory: serve's cost without a store. The library
// variants (library-sqlite, library-postgres; -library) run the relay
// library in this process, as a Go bot embeds it: serve's work on serve's
// stores, like for like with the in-process baseline, without the process
// boundary serve pays (startRelayLibraries). Every variant's
// CPU per update follows the rates (printRelayCPU). -cpuprofile writes each
// serve child's CPU and allocation profiles.
func runRelay(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.SetOutput(out)
	n := fs.Int("updates", relayDefaultUpdates, "updates per measured run")
	rounds := fs.Int("rounds", relayDefaultRounds, "rounds; each runs every variant once, alternating")
	conns := fs.Int("conns", relayDefaultConns, "concurrent webhook connections (Telegram's max_connections)")
	chats := fs.Int("chats", relayDefaultChats, "chats the updates are spread over (serve keeps each chat in order)")
	withPG := fs.Bool("pg", true, "also run serve on a throwaway durable PostgreSQL")
	concurrency := fs.Int("concurrency", 0, "serve --concurrency (0: serve's default)")
	bin := fs.String("bin", "", "tgrelay binary (default: go build github.com/tgrelay/tgrelay/cmd/tgrelay)")
	binB := fs.String("bin-b", "", "a second tgrelay binary, run as variants serve-sqlite-b and serve-postgres-b, to compare two builds in one run")
	memory := fs.Bool("memory", false, "also run serve with its updates kept in memory (serve-memory: not durable, a crash loses them), to measure what serve costs without a store")
	forwarderProc := fs.Bool("forwarder-proc", true, "also run the non-durable forwarder and the floors as processes of their own (the -proc variants), as serve is, to measure what the process boundary costs")
	floorStore := fs.Bool("floor-store", true, "with -floor, also run the contract floors: the floor's machinery doing every write DESIGN's guarantees ask (claimed adds, fenced settlements with the attempt's record), on the bench's own least schema (floor-min-sqlite, floor-min-postgres) and through serve's own store (floor-store-sqlite, floor-store-postgres), in this process (like for like with the library variants) and, with -forwarder-proc, as processes (floor-min-sqlite-proc and so on, like for like with serve)")
	floorAdd := fs.Bool("floor-add", false, "with -floor and -forwarder-proc, also run the write-ahead floors as processes: the bare floor's row group-committed before the 200 and nothing written after the forward (floor-add-sqlite-proc, floor-add-postgres-proc), the least a relay that stores every update before answering can write")
	floorLog := fs.Bool("floor-log", false, "with -floor and -forwarder-proc, also run the log-shaped contract floors as processes: every write the guarantees ask, laid out so that no row is rewritten, with settlements not waited for (floor-log-sqlite-proc, floor-log-postgres-proc) and waited for (floor-log-wait-sqlite-proc, floor-log-wait-postgres-proc)")
	floorVia := fs.String("floor-forward", floorForwardServe, "how the floors forward: \"serve\" (through forward.Forwarder, serve's own forward, so a floor bounds serve with the same machinery) or \"net/http\" (through net/http's client, as the non-durable forwarder does; the floors before session 22)")
	library := fs.Bool("library", true, "also run the relay library in this process (library-sqlite, library-postgres): relay.New on serve's stores, as a Go bot embeds it, compared like for like with the in-process baseline")
	floor := fs.Bool("floor", true, "also run the floor variants (floor-sqlite, floor-postgres): the non-durable forwarder plus a group-committed row before the 200 and its settlement after the forward")
	serveCPUs := fs.String("serve-cpus", "", serveCPUsUsage)
	traceFloors := fs.String("trace-floors", "", "write a runtime execution trace of each -proc floor's whole run to `prefix`-<variant>.trace (serve's: TGRELAY_TEST_TRACE, through a wrapper script given to -bin)")
	pgStats := fs.Bool("pg-statements", false, "with -pg, also report what each PostgreSQL variant's statements cost the server per update, from pg_stat_statements (the throwaway cluster preloads it)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of each child's whole run (serve's and the -proc variants') to `prefix`-<variant>.pprof, and serve's allocations to prefix-<variant>.allocs.pprof")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *rounds < 1 || *conns < 1 || *chats < 1 || *concurrency < 0 {
		return errors.New("-updates, -rounds, -conns and -chats must be positive, -concurrency not negative")
	}
	dir, remove, err := buildsInTempDir(ctx, "relay", *serveCPUs, bin, binB, out)
	defer remove()
	if err != nil {
		return err
	}

	// serve needs a Bot API at start; nothing is sent through it.
	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}})
	defer tg.Close()

	sink, err := startRelaySink()
	if err != nil {
		return err
	}
	defer sink.close()

	var variants []*relayVariant
	serveArgs := func(db string) []string {
		a := []string{"--db", db, "--api-root", tg.URL, "--forward", sink.url,
			"--webhook-check-interval", "0", "--log-level", "warn"}
		if *concurrency > 0 {
			a = append(a, "--concurrency", strconv.Itoa(*concurrency))
		}
		return a
	}
	var stats *pgStatements
	if *pgStats {
		stats = &pgStatements{}
	}
	served, pgDB, postmaster, stopServes, err := startRelayServes(ctx, out, dir, *bin, *binB, *withPG, *memory, serveArgs, tg.Token, *cpuprofile, stats)
	defer stopServes()
	if err != nil {
		return err
	}
	if *library {
		pgURL, err := variantDB(ctx, pgDB, stats, "library-postgres")
		if err != nil {
			return err
		}
		libs, stopLibs, err := startRelayLibraries(ctx, dir, pgURL, tg.URL, tg.Token, sink.url)
		defer stopLibs()
		if err != nil {
			return err
		}
		served = append(served, libs...)
	}
	if *floor {
		pgURL, err := variantDB(ctx, pgDB, stats, "floor-postgres")
		if err != nil {
			return err
		}
		floors, stopFloors, err := startRelayFloors(ctx, dir, pgURL, sink.url, *floorVia)
		defer stopFloors()
		if err != nil {
			return err
		}
		served = append(served, floors...)
		if *floorStore {
			contract, stopContract, err := startRelayContractFloors(ctx, dir, pgDB, stats, sink.url, *floorVia)
			defer stopContract()
			if err != nil {
				return err
			}
			served = append(served, contract...)
		}
		if *forwarderProc {
			// Each floor process runs on a SQLite file of its own in dir, or
			// (file empty) on a PostgreSQL database of its own, when there is
			// a cluster.
			type floorProc struct{ name, about, flag, file string }
			procs := []floorProc{
				{"floor-sqlite-proc", "floor-sqlite as a process of its own, as serve is", "-floor-sqlite", "floor-proc.db"},
				{"floor-postgres-proc", "floor-postgres as a process of its own, as serve is", "-floor-postgres", ""},
			}
			if *floorAdd {
				procs = append(procs,
					floorProc{"floor-add-sqlite-proc", "floor-sqlite-proc with no settlement: the row before the 200 alone", "-floor-add-sqlite", "floor-add-proc.db"},
					floorProc{"floor-add-postgres-proc", "floor-add-sqlite-proc on PostgreSQL", "-floor-add-postgres", ""})
			}
			if *floorLog {
				procs = append(procs,
					floorProc{"floor-log-sqlite-proc", "floor-min-sqlite-proc laid out so that no row is rewritten: the row and its lease entry before the 200; after the forward, the lease entry deleted (fenced) and the attempt's record appended, queued for the next commit, waited for by nobody", "-floor-log-sqlite", "floor-log-proc.db"},
					floorProc{"floor-log-wait-sqlite-proc", "floor-log-sqlite-proc with each settlement waiting for its commit, as a store's Settle does", "-floor-log-wait-sqlite", "floor-log-wait-proc.db"},
					floorProc{"floor-log-postgres-proc", "floor-log-sqlite-proc on PostgreSQL", "-floor-log-postgres", ""},
					floorProc{"floor-log-wait-postgres-proc", "floor-log-wait-sqlite-proc on PostgreSQL", "-floor-log-wait-postgres", ""})
			}
			if *floorStore {
				procs = append(procs,
					floorProc{"floor-min-sqlite-proc", "floor-sqlite-proc writing what the guarantees ask (a claimed row, a fenced settlement with the attempt's record) on the bench's own schema, one index", "-floor-min-sqlite", "floor-min-proc.db"},
					floorProc{"floor-min-postgres-proc", "floor-min-sqlite-proc on PostgreSQL", "-floor-min-postgres", ""},
					floorProc{"floor-store-sqlite-proc", "floor-sqlite-proc with serve's store (sqlitestore) doing the guarantees' writes: claimed adds, fenced settlements with records", "-floor-store-sqlite", "floor-store-proc.db"},
					floorProc{"floor-store-postgres-proc", "floor-postgres-proc with serve's store (pgstore) doing the guarantees' writes", "-floor-store-postgres", ""})
			}
			for _, p := range procs {
				db, err := floorDB(ctx, dir, p.file, pgDB, stats, p.name)
				if err != nil {
					return err
				}
				if db == "" {
					continue // a PostgreSQL floor without a cluster
				}
				extra := []string{p.flag, db, "-floor-forward", *floorVia}
				if *cpuprofile != "" {
					extra = append(extra, "-cpuprofile", *cpuprofile+"-"+p.name+".pprof")
				}
				if *traceFloors != "" {
					extra = append(extra, "-trace", *traceFloors+"-"+p.name+".trace")
				}
				proc, err := startForwarderProc(ctx, sink.url, *conns, extra...)
				if err != nil {
					return fmt.Errorf("%s: %w", p.name, err)
				}
				defer proc.stop()
				served = append(served, servedRelay{name: p.name, about: p.about, url: proc.url, pid: proc.cmd.Process.Pid})
			}
		}
	}
	for _, v := range served {
		variants = append(variants, &relayVariant{name: v.name, about: v.about, url: v.url, pid: v.pid})
	}

	base, err := startNaiveForwarder(sink.url, *conns)
	if err != nil {
		return err
	}
	defer base.close()
	if *forwarderProc {
		var extra []string
		if *cpuprofile != "" {
			extra = []string{"-cpuprofile", *cpuprofile + "-non-durable-proc.pprof"}
		}
		proc, err := startForwarderProc(ctx, sink.url, *conns, extra...)
		if err != nil {
			return err
		}
		defer proc.stop()
		variants = append(variants, &relayVariant{name: "non-durable-proc", about: "the baseline's forwarder as a process of its own, as serve is (not the baseline: for the CPU a process boundary costs)", url: proc.url, pid: proc.cmd.Process.Pid})
	}
	variants = append(variants, &relayVariant{name: "non-durable", about: "baseline: forward each webhook request straight away, store nothing", url: base.url})

	fmt.Fprintf(out, "relay: %d updates per run over %d chats, %d webhook connections, %d rounds\n", *n, *chats, *conns, *rounds)
	for _, v := range variants {
		fmt.Fprintf(out, "  %-15s %s\n", v.name, v.about)
	}
	gen := newRelayLoad(*conns, *chats)
	defer gen.close()

	// Warm-up: connections, caches, table pages.
	for _, v := range variants {
		if _, err := gen.run(ctx, sink, v.url, min(*n, 300)); err != nil {
			return fmt.Errorf("%s warm-up: %w", v.name, err)
		}
	}
	if err := stats.reset(ctx); err != nil {
		return err
	}
	for r := 1; r <= *rounds; r++ {
		for _, v := range variants {
			before, err := relayCPUSnapshot(v.pid, postmaster)
			if err != nil {
				return err
			}
			res, err := gen.run(ctx, sink, v.url, *n)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", v.name, r, err)
			}
			after, err := relayCPUSnapshot(v.pid, postmaster)
			if err != nil {
				return err
			}
			res.cpu = after.minus(before)
			v.results = append(v.results, res)
			fmt.Fprintf(out, "round %d  %-15s %8.0f updates/s  (accepted in %v, forwarded in %v, p50 %v, p99 %v, re-posts %d, duplicates %d)\n",
				r, v.name, res.rate(), res.accepted.Round(time.Millisecond), res.forwarded.Round(time.Millisecond),
				res.p50.Round(100*time.Microsecond), res.p99.Round(100*time.Microsecond), res.reposts, res.duplicates)
		}
	}

	baseRate := variants[len(variants)-1].median().rate()
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tmedian updates/s\tp50 latency\tp99 latency\tvs non-durable\t")
	for _, v := range variants {
		m := v.median()
		fmt.Fprintf(tw, "%s\t%.0f\t%v\t%v\t%.2fx\t\n", v.name, m.rate(), m.p50.Round(100*time.Microsecond), m.p99.Round(100*time.Microsecond), m.rate()/baseRate)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printRelayCPU(out, variants)
	if err := stats.report(ctx, out, *rounds**n); err != nil {
		return err
	}
	kv := []string{"updates=" + strconv.Itoa(*n), "rounds=" + strconv.Itoa(*rounds), "conns=" + strconv.Itoa(*conns), "chats=" + strconv.Itoa(*chats)}
	for _, v := range variants {
		key := strings.ReplaceAll(strings.TrimPrefix(v.name, "serve-"), "-", "_")
		kv = append(kv, fmt.Sprintf("%s_ups=%.0f", key, v.median().rate()))
	}
	for _, v := range variants[:len(variants)-1] {
		key := strings.ReplaceAll(strings.TrimPrefix(v.name, "serve-"), "-", "_")
		ratio := v.median().rate() / baseRate
		if strings.HasPrefix(v.name, "floor-") || strings.HasSuffix(v.name, "-proc") || v.name == "serve-memory" {
			kv = append(kv, fmt.Sprintf("%s_ratio=%.2f", key, ratio)) // a ceiling, not a goal
			continue
		}
		kv = append(kv, fmt.Sprintf("%s_ratio=%.2f %s_goal_0.5x=%t", key, ratio, key, ratio >= relayGoal))
	}
	// Each relay against the bounds of its engine: serve, a process,
	// against the floors as processes and the baseline's forwarder as one
	// (how much of what a durable sidecar can reach here serve reaches);
	// the library against the floors in this process, like for like.
	rates := map[string]float64{}
	for _, v := range variants {
		rates[v.name] = v.median().rate()
	}
	underscored := func(s string) string { return strings.ReplaceAll(s, "-", "_") }
	for _, v := range variants {
		var key, eng string // key names v in the RESULT line
		var bounds []string
		switch rest, isServe := strings.CutPrefix(v.name, "serve-"); {
		case isServe:
			key = rest // sqlite, postgres-b, memory
			eng, _, _ = strings.Cut(rest, "-")
			bounds = []string{"floor-" + eng, "floor-" + eng + "-proc", "floor-min-" + eng + "-proc", "floor-store-" + eng + "-proc"}
			if v.name != "serve-memory" {
				bounds = append([]string{"non-durable-proc"}, bounds...)
			}
		case strings.HasPrefix(v.name, "library-"):
			key, eng = v.name, strings.TrimPrefix(v.name, "library-")
			bounds = []string{"floor-" + eng, "floor-min-" + eng, "floor-store-" + eng}
		default:
			continue
		}
		for _, b := range bounds {
			if rates[b] == 0 {
				continue
			}
			ratio := rates[v.name] / rates[b]
			fmt.Fprintf(out, "%s vs %s: %.2fx\n", v.name, b, ratio)
			// floor, floor_proc, floor_min_proc, non_durable_proc, ...
			kv = append(kv, fmt.Sprintf("%s_vs_%s=%.2f", underscored(key), underscored(strings.Replace(b, "-"+eng, "", 1)), ratio))
		}
	}
	// A second build against the first, round by round: on a machine
	// whose speed drifts during a run, the rounds each build won and the
	// median of the per-round ratios say more than two medians do.
	byName := map[string]*relayVariant{}
	for _, v := range variants {
		byName[v.name] = v
	}
	for _, v := range variants {
		a := byName[strings.TrimSuffix(v.name, "-b")]
		if !strings.HasSuffix(v.name, "-b") || a == nil {
			continue
		}
		wins, ratio := pairedRounds(a.results, v.results)
		fmt.Fprintf(out, "%s against %s: faster in %d of %d rounds, median of per-round ratios %.3fx\n", v.name, a.name, wins, len(v.results), ratio)
		key := strings.ReplaceAll(strings.TrimPrefix(v.name, "serve-"), "-", "_")
		kv = append(kv, fmt.Sprintf("%s_round_wins=%d %s_paired_ratio=%.3f", key, wins, key, ratio))
	}
	fmt.Fprintf(out, "RESULT relay %s\n", strings.Join(kv, " "))
	return nil
}

// variantDB creates a database of its own for the PostgreSQL variant
// name on the cluster pgDB creates them on, under name in the statements
// report; "" when there is no cluster (pgDB nil).
func variantDB(ctx context.Context, pgDB func(context.Context) (string, error), stats *pgStatements, name string) (string, error) {
	if pgDB == nil {
		return "", nil
	}
	url, err := pgDB(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	stats.name(name, url)
	return url, nil
}

// floorDB returns where the floor variant name keeps its rows: file in
// dir when file is set, else a PostgreSQL database of its own (see
// variantDB), "" when there is no cluster.
func floorDB(ctx context.Context, dir, file string, pgDB func(context.Context) (string, error), stats *pgStatements, name string) (string, error) {
	if file != "" {
		return filepath.Join(dir, file), nil
	}
	return variantDB(ctx, pgDB, stats, name)
}

// pairedRounds compares b's runs with a's, round by round (the runs of one
// round are neighbours in time): how many rounds b was faster in, and the
// median of b's rate over a's.
func pairedRounds(a, b []relayResult) (wins int, medianRatio float64) {
	n := min(len(a), len(b))
	ratios := make([]float64, n)
	for i := range n {
		ratios[i] = b[i].rate() / a[i].rate()
		if ratios[i] > 1 {
			wins++
		}
	}
	return wins, median(ratios)
}

// relayVariant is one side of the comparison and its measured runs.
type relayVariant struct {
	name, about string
	url         string
	pid         int // the serve child's; 0 for a relay in this process
	results     []relayResult
}

// median returns the run with the median rate.
func (v *relayVariant) median() relayResult {
	rs := slices.Clone(v.results)
	slices.SortFunc(rs, func(a, b relayResult) int {
		switch {
		case a.rate() < b.rate():
			return -1
		case a.rate() > b.rate():
			return 1
		}
		return 0
	})
	return rs[len(rs)/2]
}

// relayServe is a `tgrelay serve` child process.
type relayServe struct {
	cmd        *exec.Cmd
	done       chan error
	webhookURL string
}

// serveCPUsUsage is the -serve-cpus flag's usage, for the scenarios that
// start serve children (see pinServes).
const serveCPUsUsage = "run every serve on these CPUs only (a `list` as taskset takes it, such as 1), as on a machine with that many CPUs, whose default GOMAXPROCS follows; compare builds with -bin-b, since the non-durable forwarder is not pinned"

// buildsInTempDir makes a scenario's temporary directory (name in its
// name), builds tgrelay into it unless *bin names a build, and pins *bin
// and *binB to cpus (see pinServes). remove deletes the directory; it is
// set even on an error.
func buildsInTempDir(ctx context.Context, name, cpus string, bin, binB *string, out io.Writer) (dir string, remove func(), err error) {
	remove = func() {}
	if dir, err = os.MkdirTemp("", "tgrelay-bench-"+name+"-"); err != nil {
		return "", remove, err
	}
	remove = func() { os.RemoveAll(dir) }
	if *bin, err = buildTgrelay(ctx, dir, *bin, out); err != nil {
		return dir, remove, err
	}
	return dir, remove, pinServes(dir, cpus, bin, binB)
}

// pinServes makes bin and binB (when set) scripts in dir that run them on
// the CPUs of list only; an empty list leaves them as they are.
func pinServes(dir, list string, bin, binB *string) error {
	if list == "" {
		return nil
	}
	var err error
	if *bin, err = pinnedBinary(dir, "tgrelay-pinned", *bin, list); err != nil || *binB == "" {
		return err
	}
	*binB, err = pinnedBinary(dir, "tgrelay-b-pinned", *binB, list)
	return err
}

// pinnedBinary writes dir/name, a script that runs bin on the CPUs of
// list only (taskset -c list), and returns its path. The script execs, so
// the process it starts keeps its process id, whose CPU the scenarios read.
func pinnedBinary(dir, name, bin, list string) (string, error) {
	if list == "" || strings.Trim(list, "0123456789,-") != "" {
		return "", fmt.Errorf("-serve-cpus %q: want a CPU list such as 1 or 0-1", list)
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return "", fmt.Errorf("-serve-cpus needs taskset (util-linux): %w", err)
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	path := filepath.Join(dir, name)
	script := "#!/bin/sh\nexec " + quote(taskset) + " -c " + list + " " + quote(bin) + ` "$@"` + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", err
	}
	return path, nil
}

func startRelayServe(ctx context.Context, name, bin string, args []string, token, dir, profile string, extraEnv ...string) (*relayServe, error) {
	listen, err := relayFreeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := relayFreeAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	args = append([]string{"serve", "--listen", listen, "--path", relayWebhookPath, "--admin-listen", admin}, args...)
	cmd := exec.Command(bin, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TGRELAY_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "TGRELAY_TOKEN="+token, "TGRELAY_WEBHOOK_SECRET="+relaySecret)
	cmd.Env = append(cmd.Env, extraEnv...)
	if profile != "" {
		p, err := filepath.Abs(profile + "-" + name + ".pprof")
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, "TGRELAY_TEST_CPUPROFILE="+p, "TGRELAY_TEST_MEMPROFILE="+strings.TrimSuffix(p, ".pprof")+".allocs.pprof")
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &relayServe{cmd: cmd, done: make(chan error, 1), webhookURL: "http://" + listen + relayWebhookPath}
	go func() { s.done <- cmd.Wait() }()
	if err := relayWaitReady(ctx, admin, s.done); err != nil {
		s.stop()
		b, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%s: %w\n%s", name, err, b)
	}
	return s, nil
}

// relayWaitReady polls /readyz until 200, the process exits, or 30 s pass.
func relayWaitReady(ctx context.Context, admin string, done chan error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("exited before ready: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-tick.C:
		}
		if resp, err := c.Get("http://" + admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (s *relayServe) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
