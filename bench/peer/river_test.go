package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPeerRiverSmall runs the whole scenario at a tiny size on both engines:
// every variant must record and complete every item (the scenario checks
// the rows and the handler counts), and the RESULT line must carry every
// engine's rates and ratios.
func TestPeerRiverSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := runPeerRiver(ctx, []string{"-n", "120", "-producers", "6", "-workers", "4", "-batch", "10", "-rounds", "1", "-pg-conns", "8"}, &out)
	if err != nil {
		t.Fatalf("peer-river: %v\n%s", err, out.String())
	}
	engines := []string{"sqlite"}
	if strings.Contains(out.String(), "postgres: UNAVAILABLE") {
		if os.Getenv("TGRELAY_REQUIRE_PG") != "" {
			t.Fatalf("PostgreSQL unavailable but TGRELAY_REQUIRE_PG is set:\n%s", out.String())
		}
		t.Log("PostgreSQL not installed: SQLite only")
	} else {
		engines = append(engines, "postgres")
	}
	var result string
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "RESULT peer-river ") {
			result = line
		}
	}
	if result == "" {
		t.Fatalf("no RESULT line:\n%s", out.String())
	}
	for _, e := range engines {
		for _, key := range []string{"_tgrelay_ips=", "_insert_ips=", "_insertmany_ips=", "_insertmany_p99_ms=", "_vs_insertmany=", "_vs_insert="} {
			if !strings.Contains(result, " "+e+key) {
				t.Errorf("RESULT has no %s%s: %s", e, key, result)
			}
		}
	}
	if strings.Contains(out.String(), "postgres") && !strings.Contains(out.String(), "UNAVAILABLE") {
		// PostgreSQL shows WAL and commits: the table must print numbers for them.
		for line := range strings.Lines(out.String()) {
			if strings.Contains(line, "postgres ") && strings.Contains(line, "River InsertMany") && strings.Count(line, " - ") > 0 {
				t.Errorf("PostgreSQL row without WAL or commits: %q", line)
			}
		}
	}
}

// TestParseProcStat reads the fields after the command name, which may hold
// spaces and parentheses.
func TestParseProcStat(t *testing.T) {
	line := "4242 (postgres: a) b) S 4000 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 100 1000 10"
	st, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 4000 || st.cpu != 3*time.Second || st.children != 100*time.Millisecond {
		t.Errorf("parseProcStat = %+v, want ppid 4000, cpu 3s, children 100ms", st)
	}
	if _, err := parseProcStat("4242 no name"); err == nil {
		t.Error("a line without a command name parsed")
	}
}
