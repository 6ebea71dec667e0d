package main

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// TestRelayScaleShort runs relay-scale small: 1 and 2 serve, a few hundred
// updates, and a takeover with a short lease.
func TestRelayScaleShort(t *testing.T) {
	ctx, bin, dir := buildForTest(t)
	o := scaleOptions{bin: bin, dir: dir, procs: []int{1, 2}, updates: 200, rounds: 1, conns: 8, chats: 20,
		takeover: true, takeoverN: 200, takeoverRate: 100, hold: 300 * time.Millisecond,
		lease: 3 * time.Second, grace: time.Second, sweep: 300 * time.Millisecond}
	res, err := relayScaleRun(ctx, o, io.Discard)
	if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv("TGRELAY_REQUIRE_PG") == "" {
		t.Skipf("PostgreSQL is not installed: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range res.groups {
		m := g.median()
		t.Logf("%d serve: %.0f updates/s, relays %v, postgres %v, bench %v, machine %v", g.n, m.rate(), m.relayCPU, m.pgCPU, m.benchCPU, m.machineCPU)
		if m.n != 200 || m.rate() <= 0 {
			t.Errorf("%d serve: %+v, want 200 updates at a positive rate", g.n, m)
		}
		if m.relayCPU <= 0 || m.pgCPU <= 0 || m.machineCPU < m.relayCPU {
			t.Errorf("%d serve: relays %v, postgres %v, machine %v: want CPU measured for both, the machine's at least the relays'", g.n, m.relayCPU, m.pgCPU, m.machineCPU)
		}
	}
	tk := res.takeover
	if tk == nil {
		t.Fatal("no takeover measured")
	}
	t.Logf("takeover: %+v", *tk)
	if len(tk.held) == 0 || tk.missing != 0 || tk.max <= 0 || tk.max > tk.wait {
		t.Errorf("takeover %+v: want held updates, all forwarded again within the bound", *tk)
	}
	if err := res.print(io.Discard, o); err != nil {
		t.Error(err)
	}
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses, as proc(5) allows.
	line := "4242 (postgres: a (b) c) S 4000 4242 4242 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 1 0 100 1000 10 18446744073709551615\n"
	st, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 4000 || st.cpu != 3250*time.Millisecond || st.children != 70*time.Millisecond {
		t.Errorf("parsed %+v; want ppid 4000, cpu 3.25s, children 70ms", st)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 (x) S a b c d e f g h i j k l m n o p"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
}

func TestParseProcs(t *testing.T) {
	t.Parallel()
	got, err := parseProcs("3, 1,2")
	if err != nil || len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("parseProcs = %v, %v; want [1 2 3]", got, err)
	}
	for _, bad := range []string{"", "0", "1,1", "9", "x"} {
		if _, err := parseProcs(bad); err == nil {
			t.Errorf("parseProcs(%q) succeeded", bad)
		}
	}
}
