package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
)

// runGatewayFlood measures an app that sends as fast as it can against
// telegramtest with Telegram's limits on: through tgrelay's gateway (the
// Bot API proxy, which sends through throttle's limiter), and
// directly (honouring every 429's retry_after, as a careful app does),
// alternately.
//
// The app: 32 workers send the messages (9 in 10 to 40 private chats, 1 in
// 10 to 10 groups, round robin), one more goroutine floods an eleventh
// group (a message as soon as the previous one is answered), and a quiet
// private chat sends one reply every 2 s; its reply's wait (request to
// answer, retries included) is the fairness figure.
//
// Time is scaled: every window of telegramtest's limits and of the
// limiter, the app's retry_after sleeps, the limiter's MaxWait and the
// quiet chat's period are divided by -scale, so a run at Telegram's limits
// (about 100 s for 3,000 messages at 30/s) takes 100/scale seconds. Counts
// and ratios keep their meaning; times are reported in Telegram's time
// (multiplied back). What does not scale is the machine's own latency: the
// limiter counts a send from its answer (throttle's package doc,
// "Counting"), so its bot-wide rate is at most Count per (Per + round
// trip), and a round trip of a few ms weighs -scale times more against a
// window divided by -scale. The table prints the median round trip.
func runGatewayFlood(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gateway-flood", flag.ContinueOnError)
	fs.SetOutput(out)
	messages := fs.Int("messages", 3000, "messages the workers send")
	workers := fs.Int("workers", 32, "app workers")
	scale := fs.Float64("scale", 4, "time scale: limits' windows and the app's waits are divided by it")
	quietEvery := fs.Duration("quiet-every", 5*time.Second, "the quiet chat's silence between two replies, in Telegram's time")
	rounds := fs.Int("rounds", 1, "rounds (each runs both modes, alternately)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *messages < 1 || *workers < 1 || *scale < 1 || *scale > 100 || *rounds < 1 {
		return errors.New("need messages ≥ 1, workers ≥ 1, 1 ≤ scale ≤ 100, rounds ≥ 1")
	}
	s := *scale
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) / s) }
	limits := telegramtest.Limits{
		Bot:   telegramtest.Limit{Count: 30, Per: sc(time.Second)},
		Chat:  telegramtest.Limit{Count: 1, Per: sc(time.Second)},
		Group: telegramtest.Limit{Count: 20, Per: sc(time.Minute)},
	}
	fmt.Fprintf(out, "gateway-flood: %d messages, %d workers, 40 private chats + 10 groups (1 in 10 messages), 1 flooding group, 1 quiet chat every %v\n",
		*messages, *workers, *quietEvery)
	fmt.Fprintf(out, "telegramtest and the limiter: 30/s per bot, 1/s per chat, 20/min per group; time scaled ×%g (a run of 100 s of Telegram's time takes %v)\n",
		s, sc(100*time.Second).Round(time.Millisecond))
	fmt.Fprintln(out, "tgrelay = the app calls package gateway's Bot API proxy (a loopback listener), which sends through throttle.NewTransport")
	fmt.Fprintf(out, "\n%-8s %5s %9s %11s %7s %9s %8s %9s %9s %9s %10s %12s\n",
		"mode", "round", "elapsed", "delivered/s", "vs max", "app 429s", "tg 429s", "quiet p50", "quiet p99", "quiet max", "flood msgs", "rtt p50 real")
	results := map[string][]floodResult{}
	for round := 1; round <= *rounds; round++ {
		for _, mode := range []string{"tgrelay", "direct"} {
			r, err := floodOnce(ctx, mode, limits, *messages, *workers, s, sc(*quietEvery))
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			results[mode] = append(results[mode], r)
			tg := func(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()*s) }
			fmt.Fprintf(out, "%-8s %5d %9s %11.1f %7.3f %9d %8d %9s %9s %9s %10d %12s\n",
				mode, round, tg(r.elapsed), r.rate, r.rate/30, r.app429, r.tg429,
				tg(r.quietP50), tg(r.quietP99), tg(r.quietMax), r.flood, r.rttP50.Round(100*time.Microsecond))
		}
	}
	last := func(mode string) floodResult { rs := results[mode]; return rs[len(rs)-1] }
	t, d := last("tgrelay"), last("direct")
	fmt.Fprintf(out, "\nelapsed, delivered/s and quiet waits are in Telegram's time; vs max = delivered/s ÷ 30 (the bot-wide limit, which binds this workload);\n")
	fmt.Fprintf(out, "rtt p50 real = the app's median HTTP round trip in real time (tgrelay's includes the wait for a turn)\n")
	fmt.Fprintf(out, "RESULT gateway-flood via=gateway scale=%g app429_tgrelay=%d app429_direct=%d tg429_tgrelay=%d delivered_ratio_tgrelay=%.3f delivered_ratio_direct=%.3f quiet_p99_tgrelay_s=%.2f quiet_p99_direct_s=%.2f\n",
		s, t.app429, d.app429, t.tg429, t.rate/30, d.rate/30, t.quietP99.Seconds()*s, d.quietP99.Seconds()*s)
	return nil
}

type floodResult struct {
	elapsed            time.Duration // until the last worker message was answered (real time)
	rate               float64       // every message Telegram accepted ÷ elapsed, in Telegram's time
	app429, tg429      int64         // 429s the app saw; 429s Telegram answered (through tgrelay: to the limiter)
	quietP50, quietP99 time.Duration // real time
	quietMax           time.Duration
	flood              int64         // messages the flooding group received
	rttP50             time.Duration // the app's median HTTP round trip (real time)
}

// floodOnce runs the app once in mode "tgrelay" or "direct" against a
// fresh telegramtest.
func floodOnce(ctx context.Context, mode string, limits telegramtest.Limits, messages, workers int, scale float64, quietEvery time.Duration) (floodResult, error) {
	srv := telegramtest.NewServer(telegramtest.Config{Limits: limits, Logf: func(string, ...any) {}})
	defer srv.Close()
	var privates, groups []int64
	for i := range 40 {
		c, err := srv.NewPrivateChat(srv.NewUser(fmt.Sprintf("u%d", i)))
		if err != nil {
			return floodResult{}, err
		}
		privates = append(privates, c.ID)
	}
	for i := range 11 {
		c, err := srv.NewGroup(fmt.Sprintf("g%d", i), srv.NewUser(fmt.Sprintf("m%d", i)))
		if err != nil {
			return floodResult{}, err
		}
		groups = append(groups, c.ID)
	}
	floodGroup := groups[10]
	quietChat, err := srv.NewPrivateChat(srv.NewUser("quiet"))
	if err != nil {
		return floodResult{}, err
	}

	var res floodResult
	var tg429 atomic.Int64
	base := &http.Transport{MaxIdleConnsPerHost: 2 * workers, MaxConnsPerHost: 0}
	defer base.CloseIdleConnections()
	var rt http.RoundTripper = base
	if mode == "tgrelay" {
		l, err := throttle.New(throttle.Config{
			Bot:     throttle.Limit{Count: limits.Bot.Count, Per: limits.Bot.Per},
			Chat:    throttle.Limit{Count: limits.Chat.Count, Per: limits.Chat.Per},
			Group:   throttle.Limit{Count: limits.Group.Count, Per: limits.Group.Per},
			MaxWait: time.Duration(float64(throttle.DefaultMaxWait) / scale),
			ObserveFunc: func(e throttle.Event) {
				if e.Kind == throttle.EventTooManyRequests {
					tg429.Add(1)
				}

			},
		})
		if err != nil {
			return floodResult{}, err
		}
		rt = throttle.NewTransport(l, base)
	}
	url := srv.URL + "/bot" + srv.Token + "/sendMessage"
	if mode == "tgrelay" { // the app calls the gateway, which calls telegramtest through the limiter
		gw, err := gateway.New(gateway.Config{Token: srv.Token, APIRoot: srv.URL, Transport: rt, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return floodResult{}, err
		}
		gsrv := httptest.NewServer(gw)
		defer gsrv.Close()
		url = gsrv.URL + "/bot" + srv.Token + "/sendMessage"
		rt = &http.Transport{MaxIdleConnsPerHost: 2 * workers}
	}
	app := &floodApp{client: &http.Client{Transport: rt, Timeout: time.Minute}, url: url, scale: scale}

	jobs := make(chan int64, messages)
	for i := range messages {
		if i%10 == 9 {
			jobs <- groups[(i/10)%10]
		} else {
			jobs <- privates[(i-i/10)%40]
		}
	}
	close(jobs)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var side sync.WaitGroup
	var flood atomic.Int64
	side.Go(func() { // the flooding group
		for runCtx.Err() == nil {
			if app.send(runCtx, floodGroup, "flood") == nil {
				flood.Add(1)
			}
		}
	})
	var quietWaits []time.Duration
	side.Go(func() { // the quiet chat: a reply, then quietEvery of silence
		for {
			if backoff.Sleep(runCtx, quietEvery) != nil {
				return
			}
			start := time.Now()
			if app.send(runCtx, quietChat.ID, "quiet") == nil {
				quietWaits = append(quietWaits, time.Since(start))
			}
		}
	})

	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range workers {
		wg.Go(func() {
			for chat := range jobs {
				if err := app.send(ctx, chat, "m"); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	stop()
	side.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if n := failed.Load(); n > 0 {
		return res, fmt.Errorf("%d messages failed", n)
	}
	res.rate = float64(len(srv.Messages())) / res.elapsed.Seconds() / scale
	res.app429 = app.limited.Load()
	res.tg429 = tg429.Load()
	if mode == "direct" {
		res.tg429 = res.app429
	}
	res.quietP50, res.quietP99 = percentile(quietWaits, 0.5), percentile(quietWaits, 0.99)
	for _, w := range quietWaits {
		res.quietMax = max(res.quietMax, w)
	}
	res.flood = int64(len(srv.MessagesTo(floodGroup)))
	res.rttP50 = percentile(app.rtts, 0.5)
	return res, nil
}

// floodApp sends sendMessage calls as a careful app does: a 429 is
// counted and waited out (retry_after, in scaled time), then sent again.
type floodApp struct {
	mu      sync.Mutex
	rtts    []time.Duration // every HTTP round trip (the wait in tgrelay's limiter included)
	client  *http.Client
	url     string
	scale   float64
	limited atomic.Int64
}

func (a *floodApp) send(ctx context.Context, chat int64, text string) error {
	body, _ := json.Marshal(map[string]any{"chat_id": chat, "text": text})
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := a.client.Do(req)
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.rtts = append(a.rtts, time.Since(start))
		a.mu.Unlock()
		var env struct {
			OK         bool `json:"ok"`
			Parameters struct {
				RetryAfter int `json:"retry_after"`
			} `json:"parameters"`
			Description string `json:"description"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&env)
		resp.Body.Close()
		switch {
		case err != nil:
			return err
		case resp.StatusCode == http.StatusTooManyRequests:
			a.limited.Add(1)
			wait := time.Duration(float64(max(env.Parameters.RetryAfter, 1)) * float64(time.Second) / a.scale)
			if err := backoff.Sleep(ctx, wait); err != nil {
				return err
			}
		case !env.OK:
			return fmt.Errorf("sendMessage: %d %s", resp.StatusCode, env.Description)
		default:
			return nil
		}
	}
}
