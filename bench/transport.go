package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/transport"
)

// trBody is a sendMessage-sized JSON request body.
const trBody = `{"chat_id":123456789,"text":"Your order #4821 has shipped and will arrive on Thursday. Track it here: https://example.com/t/4821","parse_mode":"HTML","disable_notification":false}`

// trAnswer is a Bot API sendMessage answer of typical size.
const trAnswer = `{"ok":true,"result":{"message_id":4821,"from":{"id":987654321,"is_bot":true,"first_name":"Shop","username":"shop_bot"},"chat":{"id":123456789,"first_name":"Ann","type":"private"},"date":1764400000,"text":"Your order #4821 has shipped and will arrive on Thursday. Track it here: https://example.com/t/4821"}}`

// runTransport posts sendMessage-sized JSON to a local HTTP/1.1 TLS server
// through three clients, alternating them round by round:
//
//   - tgrelay: transport.New with its defaults (MaxIdleConnsPerHost 32),
//     trusting the test certificate;
//   - default: an http.Client over a clone of http.DefaultTransport (Go's
//     defaults: MaxIdleConnsPerHost 2) trusting the test certificate;
//   - per-request: the same clone with DisableKeepAlives, so every request
//     pays a new TCP connection and TLS handshake (the reference design);
//   - tuned (for information, no goal): the clone with MaxIdleConnsPerHost
//     raised to -concurrency, which a careful user would set.
//
// Each client runs for -duration per round, first one at a time, then with
// -concurrency goroutines. Absolute req/s drift on a shared machine, so the
// ratios are the medians of the ratios measured within each round (the
// clients ran back to back); req/s are totals over all rounds.
func runTransport(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("transport", flag.ContinueOnError)
	rounds := fs.Int("rounds", 10, "alternating rounds")
	duration := fs.Duration("duration", 300*time.Millisecond, "time per client per round and mode")
	concurrency := fs.Int("concurrency", 32, "goroutines in the concurrent mode")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, trAnswer)
	}))
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tlsCfg := &tls.Config{RootCAs: roots}
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }

	ours, err := transport.New(transport.Config{TLSConfig: tlsCfg, Proxy: noProxy}) // defaults otherwise
	if err != nil {
		return err
	}
	def := http.DefaultTransport.(*http.Transport).Clone()
	def.TLSClientConfig = tlsCfg
	def.Proxy = noProxy
	perReq := def.Clone()
	perReq.DisableKeepAlives = true
	tuned := def.Clone()
	tuned.MaxIdleConnsPerHost = *concurrency
	clients := []struct {
		name string
		rt   http.RoundTripper
		idle func()
	}{
		{"tgrelay", ours, ours.CloseIdleConnections},
		{"default", def, def.CloseIdleConnections},
		{"per-request", perReq, perReq.CloseIdleConnections},
		{"tuned", tuned, tuned.CloseIdleConnections},
	}
	modes := []struct {
		name string
		n    int
	}{{"sequential", 1}, {fmt.Sprintf("concurrent-%d", *concurrency), *concurrency}}

	type total struct {
		reqs    int64
		elapsed time.Duration
	}
	totals := make([][]total, len(modes))
	perRound := make([][][]float64, len(modes)) // mode, client, round -> req/s
	for m := range modes {
		totals[m] = make([]total, len(clients))
		perRound[m] = make([][]float64, len(clients))
	}
	fmt.Fprintf(out, "transport: POST %d-byte JSON, %d-byte answer, HTTPS (HTTP/1.1) on loopback; %d rounds x %v per client and mode\n\n",
		len(trBody), len(trAnswer), *rounds, *duration)
	fmt.Fprintf(out, "%-6s %-14s %-12s %10s\n", "round", "mode", "client", "req/s")
	for r := range *rounds {
		for m, mode := range modes {
			for c, cl := range clients {
				if err := ctx.Err(); err != nil {
					return err
				}
				n, el, err := trLoad(ctx, cl.rt, srv.URL, mode.n, *duration)
				if err != nil {
					return fmt.Errorf("%s %s: %w", cl.name, mode.name, err)
				}
				totals[m][c].reqs += n
				totals[m][c].elapsed += el
				perRound[m][c] = append(perRound[m][c], float64(n)/el.Seconds())
				fmt.Fprintf(out, "%-6d %-14s %-12s %10.0f\n", r+1, mode.name, cl.name, float64(n)/el.Seconds())
			}
		}
	}
	for _, cl := range clients {
		cl.idle()
	}

	rate := func(m, c int) float64 { return float64(totals[m][c].reqs) / totals[m][c].elapsed.Seconds() }
	pairedRatio := func(m, a, b int) float64 {
		rs := make([]float64, len(perRound[m][a]))
		for i := range rs {
			rs[i] = perRound[m][a][i] / perRound[m][b][i]
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	fmt.Fprintf(out, "\nreq/s over all rounds; ratios: median of per-round ratios\n")
	fmt.Fprintf(out, "%-14s %10s %10s %12s %10s %12s %14s %10s\n", "mode", "tgrelay", "default", "per-request", "tuned", "vs default", "vs per-request", "vs tuned")
	kv := []string{}
	minDef, minPer := 1e9, 1e9
	for m, mode := range modes {
		t, d, p := rate(m, 0), rate(m, 1), rate(m, 2)
		vd, vp, vt := pairedRatio(m, 0, 1), pairedRatio(m, 0, 2), pairedRatio(m, 0, 3)
		fmt.Fprintf(out, "%-14s %10.0f %10.0f %12.0f %10.0f %11.2fx %13.2fx %9.2fx\n", mode.name, t, d, p, rate(m, 3), vd, vp, vt)
		key := "seq"
		if m > 0 {
			key = "conc"
		}
		kv = append(kv, fmt.Sprintf("%s_tgrelay_rps=%.0f %s_default_rps=%.0f %s_perreq_rps=%.0f %s_tuned_rps=%.0f %s_vs_default=%.2f %s_vs_perreq=%.2f %s_vs_tuned=%.2f",
			key, t, key, d, key, p, key, rate(m, 3), key, vd, key, vp, key, vt))
		minDef = min(minDef, vd)
		minPer = min(minPer, vp)
	}
	okDef, okPer := minDef >= 0.9, minPer >= 3
	fmt.Fprintf(out, "\ngoals: >= 0.9x default in every mode: %s (worst %.2fx); >= 3x per-request in every mode: %s (worst %.2fx)\n",
		trMet(okDef), minDef, trMet(okPer), minPer)
	fmt.Fprintf(out, "RESULT transport %s goal_default=%t goal_perreq=%t\n", strings.Join(kv, " "), okDef, okPer)
	return nil
}

func trMet(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// trLoad runs workers goroutines posting trBody through rt for d and
// returns the number of completed requests and the time taken.
func trLoad(ctx context.Context, rt http.RoundTripper, base string, workers int, d time.Duration) (int64, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	stopAt := time.Now().Add(d)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for time.Now().Before(stopAt) && ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/bot123456:TOKEN/sendMessage", strings.NewReader(trBody))
				if err == nil {
					req.Header.Set("Content-Type", "application/json")
					var resp *http.Response
					resp, err = rt.RoundTrip(req)
					if err == nil {
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if err == nil && resp.StatusCode != http.StatusOK {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
				}
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return done.Load(), time.Since(start), firstErr
}
