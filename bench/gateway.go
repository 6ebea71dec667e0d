package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
)

// runGateway measures the gateway's own cost: sendMessage calls from 32
// concurrent app workers against telegramtest with its limits off, (a)
// directly with Go's http.Client, (b) through the gateway without an
// identity (limiter and dispatch-aware transport only), (c) through the
// gateway with an attempt identity, so each call is fenced and journaled
// (intent and outcome) in a SQLite store with synchronous=FULL. Modes run
// alternately; the limiter's limits are raised so it never waits.
func runGateway(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(out)
	calls := fs.Int("calls", 3000, "calls per mode and round")
	workers := fs.Int("workers", 32, "concurrent app workers")
	rounds := fs.Int("rounds", 3, "rounds (each runs every mode once, alternately)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of each mode's first round to `prefix`-<mode>.pprof")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *calls < *workers || *workers < 1 || *rounds < 1 {
		return errors.New("need calls ≥ workers ≥ 1 and rounds ≥ 1")
	}
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, MaxMessages: 1 << 22})
	defer tg.Close()
	var chats []int64
	for i := range *workers {
		c, err := tg.NewPrivateChat(tg.NewUser("U" + strconv.Itoa(i)))
		if err != nil {
			return err
		}
		chats = append(chats, c.ID)
	}
	dir, err := os.MkdirTemp("", "tgrelay-bench-gateway")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "gw.db"), sqlitestore.Config{Synchronous: "FULL"})
	if err != nil {
		return err
	}
	defer store.Close()
	base, err := transport.New(transport.Config{})
	if err != nil {
		return err
	}
	big := throttle.Limit{Count: -1} // a negative count turns a limit off
	lim, err := throttle.New(throttle.Config{Bot: big, Chat: big, Group: big})
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Config{Token: tg.Token, APIRoot: tg.URL, Transport: throttle.NewTransport(lim, base), Store: store, OwnsIntake: true})
	if err != nil {
		return err
	}
	gsrv := httptest.NewServer(gw)
	defer gsrv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * *workers}}

	// One claimed update per worker and round supplies the identities.
	var nextUpdate atomic.Int64
	identities := func() ([]intake.Identity, error) {
		ids := make([]intake.Identity, *workers)
		now := time.Now()
		for i := range ids {
			u := nextUpdate.Add(1)
			if _, err := store.Add(ctx, intake.Incoming{UpdateID: u, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
				return nil, err
			}
			id, ok, err := store.ClaimOwned(ctx, u, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 3})
			if err != nil || !ok {
				return nil, fmt.Errorf("claim %d: %v %v", u, ok, err)
			}
			ids[i] = id
		}
		return ids, nil
	}
	type mode struct {
		name     string
		root     string
		identity bool
	}
	modes := []mode{{"direct", tg.URL, false}, {"gateway", gsrv.URL, false}, {"gateway+identity", gsrv.URL, true}}
	rates := map[string][]float64{}
	p50 := map[string][]time.Duration{}
	for round := range *rounds {
		for _, m := range modes {
			var ids []intake.Identity
			if m.identity {
				if ids, err = identities(); err != nil {
					return err
				}
			}
			var (
				wg    sync.WaitGroup
				next  atomic.Int64
				fails atomic.Int64
				mu    sync.Mutex
				lats  []time.Duration
			)
			stopProfile, err := startModeProfile(*cpuprofile, round, m.name)
			if err != nil {
				return err
			}
			start := time.Now()
			for w := range *workers {
				wg.Go(func() {
					var mine []time.Duration
					for {
						n := next.Add(1)
						if n > int64(*calls) || ctx.Err() != nil {
							break
						}
						body := fmt.Sprintf(`{"chat_id":%d,"text":"r%d %s %d"}`, chats[w], round, m.name, n)
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.root+"/bot"+tg.Token+"/sendMessage", bytes.NewBufferString(body))
						req.Header.Set("Content-Type", "application/json")
						if m.identity {
							id := ids[w]
							req.Header.Set(gateway.HeaderUpdateID, strconv.FormatInt(id.UpdateID, 10))
							req.Header.Set(gateway.HeaderAttempt, strconv.Itoa(id.Attempt))
							req.Header.Set(gateway.HeaderClaimID, id.ClaimID)
						}
						t0 := time.Now()
						resp, err := client.Do(req)
						if err != nil {
							if fails.Add(1) == 1 {
								fmt.Fprintf(out, "%s: first failure: %v\n", m.name, err)
							}
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							if fails.Add(1) == 1 {
								fmt.Fprintf(out, "%s: first failure: %d\n", m.name, resp.StatusCode)
							}
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lats = append(lats, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			el := time.Since(start)
			stopProfile()
			if f := fails.Load(); f > 0 {
				return fmt.Errorf("%s: %d calls failed", m.name, f)
			}
			rates[m.name] = append(rates[m.name], float64(*calls)/el.Seconds())
			p50[m.name] = append(p50[m.name], percentile(lats, 0.5))
		}
	}
	fmt.Fprintf(out, "gateway: %d sendMessage calls per mode, %d workers, %d rounds, limits off; journal on SQLite synchronous=FULL\n\n", *calls, *workers, *rounds)
	fmt.Fprintf(out, "%-18s %12s %10s %10s\n", "mode", "calls/s", "p50 ms", "vs direct")
	direct := median(rates["direct"])
	for _, m := range modes {
		r := median(rates[m.name])
		var ps []float64
		for _, d := range p50[m.name] {
			ps = append(ps, ms(d))
		}
		fmt.Fprintf(out, "%-18s %12.0f %10.2f %9.2fx\n", m.name, r, median(ps), r/direct)
	}
	fmt.Fprintf(out, "\nRESULT gateway direct_per_s=%.0f gateway_per_s=%.0f identity_per_s=%.0f ratio_plain=%.2f ratio_identity=%.2f\n",
		direct, median(rates["gateway"]), median(rates["gateway+identity"]), median(rates["gateway"])/direct, median(rates["gateway+identity"])/direct)
	return nil
}

// startModeProfile starts a CPU profile of one mode's first round when
// prefix is set, and returns the function that stops and writes it.
func startModeProfile(prefix string, round int, mode string) (func(), error) {
	if prefix == "" || round > 0 {
		return func() {}, nil
	}
	f, err := os.Create(prefix + "-" + mode + ".pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
