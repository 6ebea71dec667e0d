package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestGatewaySmall runs the gateway scenario at a tiny size, with the
// log-shaped journal floor: every call in every mode, the bare reverse
// proxy included, must succeed (the scenario fails on any), and the RESULT
// line must carry the ratios against the proxy.
func TestGatewaySmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := runGateway(ctx, []string{"-calls", "40", "-latency-calls", "8", "-workers", "4", "-rounds", "1", "-latency", "5ms", "-floor-log"}, &out)
	if err != nil {
		t.Fatalf("gateway: %v\n%s", err, out.String())
	}
	for _, row := range []string{"reverse proxy", "journal log floor", "log-shaped journal floor (no row rewritten): "} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("no %q in the output:\n%s", row, out.String())
		}
	}
	var result string
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "RESULT gateway ") {
			result = line
		}
	}
	for _, key := range []string{" calls_per_update=2 ", " proxy_per_s=", " plain_vs_proxy=", " identity_vs_proxy=", " proxy_lat_per_s=", " plain_vs_proxy_lat=", " identity_vs_proxy_lat="} {
		if !strings.Contains(result, key) {
			t.Errorf("RESULT has no%s: %q", key, result)
		}
	}
}

// TestJournalFloorsKeepTheAnswer: both journal floors keep the answer to
// every call, as the gateway's journal keeps Telegram's answer to replay
// it, so neither reads a rate no journal that replays could reach.
func TestJournalFloorsKeepTheAnswer(t *testing.T) {
	const answer = `{"ok":true,"result":{"message_id":7}}`
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	})
	for _, name := range []string{"floor", "log floor"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			var (
				st    floorStore
				query string
				err   error
			)
			if name == "floor" {
				st, err = openFloorSQLite(t.Context(), path)
				query = `SELECT count(*) FROM floor WHERE answer = ?`
			} else {
				st, err = openFloorLogSQLite(t.Context(), path, false)
				query = `SELECT count(*) FROM log_done WHERE answer = ?`
			}
			if err != nil {
				t.Fatal(err)
			}
			url, stop := startJournalFloor(upstream, st)
			const calls = 5
			for i := range calls {
				resp, err := http.Post(url+"/bot1:x/sendMessage", "application/json", strings.NewReader(`{"chat_id":1,"text":"hi"}`))
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != answer {
					t.Fatalf("call %d answered %q, want the upstream's", i, got)
				}
			}
			stop() // waits for the outcomes, and commits the log floor's queued ones
			db, err := openFloorSQLiteDB(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int
			if err := db.QueryRowContext(t.Context(), query, []byte(answer)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != calls {
				t.Fatalf("%d outcomes keep the answer, want %d", n, calls)
			}
		})
	}
}

// TestGatewayBenchEndsEachAttempt: the identity modes tell their gateway
// that each attempt is over once its calls are made, as the relay does at
// settlement, each identity once; a gateway that never heard it would
// hold counters serve never holds.
func TestGatewayBenchEndsEachAttempt(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}})
	defer tg.Close()
	const workers, perUpdate, calls = 4, 2, 21
	b := &gatewayBench{tg: tg, workers: workers, perUpdate: perUpdate, out: io.Discard, client: &http.Client{}}
	for i := range workers {
		c, err := tg.NewPrivateChat(tg.NewUser("U" + strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		b.chats = append(b.chats, c.ID)
	}
	var err error
	b.store, err = sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "gw.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.store.Close()
	var (
		mu    sync.Mutex
		ended = map[intake.Identity]int{}
	)
	m := gatewayMode{name: "identity", root: tg.URL, identity: true, ended: func(id intake.Identity) {
		mu.Lock()
		ended[id]++
		mu.Unlock()
	}}
	if _, _, err := b.run(t.Context(), m, calls, 0); err != nil {
		t.Fatal(err)
	}
	calledUnder := 0
	for id, n := range ended {
		if n != 1 {
			t.Errorf("attempt %v ended %d times, want once", id, n)
		}
		calledUnder++
	}
	// Each worker's identities carry perUpdate calls but its last, which
	// may carry fewer: every call was made under an identity that ended.
	if least, most := (calls+perUpdate-1)/perUpdate, calls/perUpdate+workers; calledUnder < least || calledUnder > most {
		t.Fatalf("%d attempts ended, want %d to %d for %d calls of %d workers", calledUnder, least, most, calls, workers)
	}
}
