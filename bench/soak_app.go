package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// The parts the long-running scenarios (soak, pg-failover, pg-stall)
// share: a generator that plays Telegram at a steady rate, an app that
// replies through serve's gateway, and a scrape of serve's /metrics.

// soakKind is what the app does with one update, fixed by its id so that
// every attempt of an update behaves alike.
type soakKind int

const (
	soakPlain    soakKind = iota // answered 200, no reply
	soakReply                    // one sendMessage through the gateway, then 200
	soakFailOnce                 // a reply, then 500 on the first attempt, 200 after
	soakPoison                   // 400 on every attempt: becomes an exhaustion
)

// soakMix is the share of each kind.
type soakMix struct{ reply, failOnce, poison float64 }

// kind picks an update's kind from a hash of its id.
func (m soakMix) kind(id int64) soakKind {
	u := unitHash(uint64(id))
	switch {
	case u < m.poison:
		return soakPoison
	case u < m.poison+m.failOnce:
		return soakFailOnce
	case unitHash(uint64(id)^0x9e3779b97f4a7c15) < m.reply:
		return soakReply
	}
	return soakPlain
}

// unitHash maps x to [0, 1) (splitmix64's finaliser).
func unitHash(x uint64) float64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / float64(1<<53)
}

// soakReplyText is the text of update id's reply: the sandbox's ledger
// counts each text once per send, so a reply sent twice shows.
func soakReplyText(id int64) string { return "soak reply " + strconv.FormatInt(id, 10) }

// soakTrack records, per update index, when the generator first posted it,
// whether a POST was answered 200, when the app first saw it and whether
// the app answered it 200 (done).
type soakTrack struct {
	lo     int64
	posted []atomic.Int64 // unix ns of the first POST
	acked  []atomic.Bool
	seen   []atomic.Int64 // unix ns of the first forward
	done   []atomic.Bool

	mu  sync.Mutex
	lat []time.Duration // first forward - first POST, since the last take
}

func newSoakTrack(lo int64, n int) *soakTrack {
	return &soakTrack{lo: lo, posted: make([]atomic.Int64, n), acked: make([]atomic.Bool, n),
		seen: make([]atomic.Int64, n), done: make([]atomic.Bool, n)}
}

func (t *soakTrack) index(id int64) (int, bool) {
	i := id - t.lo
	return int(i), i >= 0 && i < int64(len(t.posted))
}

// sawForward notes the first forward of id and its added latency.
func (t *soakTrack) sawForward(id int64, at time.Time) {
	i, ok := t.index(id)
	if !ok || !t.seen[i].CompareAndSwap(0, at.UnixNano()) {
		return
	}
	if p := t.posted[i].Load(); p != 0 {
		t.mu.Lock()
		t.lat = append(t.lat, at.Sub(time.Unix(0, p)))
		t.mu.Unlock()
	}
}

// takeLatencies returns the latencies noted since the last call.
func (t *soakTrack) takeLatencies() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lat
	t.lat = nil
	return l
}

// lost counts updates answered 200 to the generator that the app never
// answered 200 (poison ones, which never succeed, aside).
func (t *soakTrack) lost(mix soakMix) int {
	n := 0
	for i := range t.acked {
		if t.acked[i].Load() && !t.done[i].Load() && mix.kind(t.lo+int64(i)) != soakPoison {
			n++
		}
	}
	return n
}

// soakApp is the bot's endpoint: it replies through the gateway named by
// the forward's Tgrelay-Api-Root, as a bot whose library's API root is set
// per request, and acknowledges exhaustions as an operator's endpoint
// would. effect, when set, runs before the reply (a domain write).
type soakApp struct {
	*relayServer
	base   string
	token  string
	mix    soakMix
	chats  []int64
	track  *soakTrack
	client *http.Client
	effect func(r *http.Request, id int64) error

	forwards, replies, replyFailures, exhaustions atomic.Int64
	uncertain                                     atomic.Int64 // replies answered unknown
	firstReplyError                               atomic.Value // string
}

func startSoakApp(token string, chats []int64, mix soakMix, track *soakTrack) (*soakApp, error) {
	a := &soakApp{token: token, mix: mix, chats: chats, track: track,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /update", a.serveUpdate)
	mux.HandleFunc("POST /exhaustion", a.serveExhaustion)
	srv, err := startRelayServer(mux, "/update")
	if err != nil {
		return nil, err
	}
	a.relayServer = srv
	a.base = strings.TrimSuffix(srv.url, "/update")
	return a, nil
}

func (a *soakApp) close() {
	a.relayServer.close()
	a.client.CloseIdleConnections()
}

func (a *soakApp) updateURL() string     { return a.base + "/update" }
func (a *soakApp) exhaustionURL() string { return a.base + "/exhaustion" }

func (a *soakApp) serveUpdate(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	a.forwards.Add(1)
	id, err := strconv.ParseInt(r.Header.Get(wire.HeaderUpdateID), 10, 64)
	if err != nil {
		http.Error(w, "no update id", http.StatusBadRequest)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, relayMaxBody))
	a.track.sawForward(id, now)
	kind := a.mix.kind(id)
	if kind == soakPoison {
		http.Error(w, "poison", http.StatusBadRequest)
		return
	}
	if a.effect != nil {
		if err := a.effect(r, id); err != nil {
			http.Error(w, "effect: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	if kind == soakReply || kind == soakFailOnce {
		if err := a.reply(r.Context(), r.Header.Get(wire.HeaderAPIRoot), id); err != nil {
			if a.replyFailures.Add(1) == 1 {
				a.firstReplyError.Store(err.Error())
			}
			http.Error(w, "reply: "+err.Error(), http.StatusInternalServerError)
			return
		}
		a.replies.Add(1)
	}
	if kind == soakFailOnce && r.Header.Get(wire.HeaderAttempt) == "1" {
		http.Error(w, "failing once after the reply", http.StatusInternalServerError)
		return
	}
	if i, ok := a.track.index(id); ok {
		a.track.done[i].Store(true)
	}
	w.WriteHeader(http.StatusOK)
}

func (a *soakApp) reply(ctx context.Context, root string, id int64) error {
	if root == "" {
		return fmt.Errorf("no Tgrelay-Api-Root: is serve's gateway off?")
	}
	chat := a.chats[int(id)%len(a.chats)]
	params, _ := json.Marshal(map[string]any{"chat_id": chat, "text": soakReplyText(id)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, root+"/bot"+a.token+"/sendMessage", bytes.NewReader(params))
	if err != nil {
		return fmt.Errorf("bad API root")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("gateway: no answer")
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()
	if resp.StatusCode == http.StatusBadGateway && wire.OutcomeOf(resp.Header) == wire.OutcomeUnknown {
		// The gateway cannot tell whether Telegram got the call (the relay
		// or its database died between the send and the outcome) and will
		// never send it again: the app takes it as done, or its chat would
		// wait behind this update until its attempts run out.
		a.uncertain.Add(1)
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("gateway answered %d: %s", resp.StatusCode, b)
	}
	return nil
}

func (a *soakApp) serveExhaustion(w http.ResponseWriter, r *http.Request) {
	a.exhaustions.Add(1)
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, relayMaxBody))
	w.Header().Set("Tgrelay-Ack", r.Header.Get(wire.HeaderClaimID))
	w.WriteHeader(http.StatusOK)
}

// soakChats makes n private chats in the sandbox and returns their ids.
func soakChats(tg *telegramtest.Server, n int) ([]int64, error) {
	ids := make([]int64, 0, n)
	for i := range n {
		c, err := tg.NewPrivateChat(tg.NewUser("User" + strconv.Itoa(i)))
		if err != nil {
			return nil, err
		}
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// soakDoubleReplies counts reply texts the sandbox accepted more than once.
func soakDoubleReplies(tg *telegramtest.Server) (replies, doubles int) {
	seen := map[string]int{}
	for _, m := range tg.Messages() {
		if strings.HasPrefix(m.Text, "soak reply ") {
			seen[m.Text]++
		}
	}
	for _, c := range seen {
		if c > 1 {
			doubles++
		}
	}
	return len(seen), doubles
}

// soakGen plays Telegram at a steady rate: update i (id lo+i, chat
// chats[i%len]) is posted at start+i/rate by one of conns workers and
// posted again every 50 ms until answered 200. Every POST's answer time is
// recorded by status.
type soakGen struct {
	track  *soakTrack
	chats  []int64
	url    func() string
	client *http.Client

	posts, oks, non200, errs atomic.Int64
	slowest                  atomic.Int64 // ns: the longest single POST
	mu                       sync.Mutex
	answers                  []genAnswer // when collect is set
	collect                  bool
}

// genAnswer is one POST's outcome: when it started, how long it took and
// its status (0: no answer).
type genAnswer struct {
	at     time.Time
	took   time.Duration
	status int
}

func newSoakGen(track *soakTrack, chats []int64, url func() string, timeout time.Duration) *soakGen {
	return &soakGen{track: track, chats: chats, url: url,
		client: &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}}
}

// run posts every update of the track at rate, until each got a 200 or ctx
// ends; stop ends the posting of new updates early.
func (g *soakGen) run(ctx context.Context, rate float64, conns int, stop <-chan struct{}) error {
	defer g.client.CloseIdleConnections()
	n := len(g.track.posted)
	ids := make(chan int, conns)
	start := time.Now()
	go func() {
		defer close(ids)
		for i := range n {
			at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				case <-stop:
					t.Stop()
					return
				}
			}
			select {
			case ids <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for i := range ids {
				id := g.track.lo + int64(i)
				body := telegramUpdate(id, g.chats[int(id)%len(g.chats)])
				for ctx.Err() == nil {
					t0 := time.Now()
					g.track.posted[i].CompareAndSwap(0, t0.UnixNano())
					status := g.post(ctx, body)
					took := time.Since(t0)
					for {
						s := g.slowest.Load()
						if int64(took) <= s || g.slowest.CompareAndSwap(s, int64(took)) {
							break
						}
					}
					if g.collect {
						g.mu.Lock()
						g.answers = append(g.answers, genAnswer{at: t0, took: took, status: status})
						g.mu.Unlock()
					}
					if status == http.StatusOK {
						g.oks.Add(1)
						g.track.acked[i].Store(true)
						break
					}
					_ = backoff.Sleep(ctx, 50*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

func (g *soakGen) post(ctx context.Context, body []byte) int {
	g.posts.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url(), bytes.NewReader(body))
	if err != nil {
		g.errs.Add(1)
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", relaySecret)
	resp, err := g.client.Do(req)
	if err != nil {
		g.errs.Add(1)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		g.non200.Add(1)
	}
	return resp.StatusCode
}

// scrapeMetrics reads the unlabelled and labelled samples of serve's
// /metrics whose names are in want, keyed by name plus labels as printed.
func scrapeMetrics(ctx context.Context, admin string, want ...string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		key, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(key, "{")
		for _, w := range want {
			if name == w {
				if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil && !math.IsNaN(v) {
					out[key] = v
				}
			}
		}
	}
	return out, sc.Err()
}
