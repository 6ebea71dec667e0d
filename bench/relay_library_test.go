package main

import (
	"path/filepath"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestRelayLibrarySQLite drives the in-process relay library with the relay
// scenario's load generator and checks that every update reached the
// endpoint once and that the relay's store holds each one completed.
func TestRelayLibrarySQLite(t *testing.T) {
	t.Parallel()
	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}})
	defer tg.Close()
	sink, err := startRelaySink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	dir := t.TempDir()
	libs, stop, err := startRelayLibraries(t.Context(), dir, "", tg.URL, tg.Token, sink.url)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if len(libs) != 1 || libs[0].name != "library-sqlite" || libs[0].pid != 0 {
		stop()
		t.Fatalf("libraries %+v, want library-sqlite alone, in this process, without PostgreSQL", libs)
	}
	gen := newRelayLoad(8, 5)
	defer gen.close()
	const n = 200
	res, err := gen.run(t.Context(), sink, libs[0].url, n)
	stop() // drains the relay: every forwarded update is settled
	if err != nil {
		t.Fatal(err)
	}
	if res.duplicates != 0 || res.reposts != 0 {
		t.Errorf("duplicates %d, re-posts %d; want none on loopback", res.duplicates, res.reposts)
	}
	st, err := sqlitestore.Open(t.Context(), filepath.Join(dir, "library.db"), sqlitestore.Config{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stats, err := st.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := stats.Count[intake.StateCompleted]; got != n {
		t.Fatalf("%d updates completed (%v), want %d", got, stats.Count, n)
	}
}

// TestRelayContractFloorsInProcess starts the in-process contract floors
// without PostgreSQL and drives each: every update reaches the endpoint
// once.
func TestRelayContractFloorsInProcess(t *testing.T) {
	t.Parallel()
	sink, err := startRelaySink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	floors, stop, err := startRelayContractFloors(t.Context(), t.TempDir(), nil, nil, sink.url, floorForwardServe)
	defer stop()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range floors {
		names = append(names, f.name)
	}
	if len(floors) != 2 || names[0] != "floor-min-sqlite" || names[1] != "floor-store-sqlite" {
		t.Fatalf("floors %v, want floor-min-sqlite and floor-store-sqlite without PostgreSQL", names)
	}
	gen := newRelayLoad(8, 5)
	defer gen.close()
	for _, f := range floors {
		res, err := gen.run(t.Context(), sink, f.url, 200)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if res.duplicates != 0 || res.reposts != 0 {
			t.Errorf("%s: duplicates %d, re-posts %d; want none on loopback", f.name, res.duplicates, res.reposts)
		}
	}
}
