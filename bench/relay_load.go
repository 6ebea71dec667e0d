package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/internal/freeport"
)

// Bounds of the relay scenario's load generator and endpoints.
const (
	// relayMaxBody bounds a body the sink or the baseline reads.
	relayMaxBody = 1 << 20
	// relayMaxPosts bounds the posts of one update (Telegram re-delivers a
	// non-200 answer; so does the generator, up to this many times).
	relayMaxPosts = 20
	// relayRepostPause is the pause before re-posting an update.
	relayRepostPause = 20 * time.Millisecond
)

// relayFreeAddr names a free loopback port for a child process's flag,
// outside the kernel's ephemeral range (see package freeport).
func relayFreeAddr() (string, error) { return freeport.Addr() }

// relayServer is an in-process HTTP server on a loopback port.
type relayServer struct {
	srv  *http.Server
	done chan struct{}
	url  string
}

func startRelayServer(h http.Handler, path string) (*relayServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &relayServer{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{}), url: "http://" + l.Addr().String() + path}
	go func() { defer close(s.done); _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *relayServer) close() { s.srv.Close(); <-s.done }

// relaySink is the bot's forward endpoint: it answers 200 at once and
// records when each update of the current run first arrived.
type relaySink struct {
	*relayServer

	mu         sync.Mutex
	lo         int64       // first update id of the current run
	recv       []time.Time // by id-lo; zero until received
	count      int
	duplicates int
	done       chan struct{} // closed when count reaches len(recv)
}

func startRelaySink() (*relaySink, error) {
	s := &relaySink{}
	srv, err := startRelayServer(http.HandlerFunc(s.serve), "/update")
	if err != nil {
		return nil, err
	}
	s.relayServer = srv
	return s, nil
}

// expect starts tracking updates lo..lo+n-1 and returns a channel closed when
// all arrived.
func (s *relaySink) expect(lo int64, n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lo, s.recv, s.count, s.duplicates = lo, make([]time.Time, n), 0, 0
	s.done = make(chan struct{})
	return s.done
}

func (s *relaySink) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, relayMaxBody))
	var u struct {
		UpdateID int64 `json:"update_id"`
	}
	if err != nil || json.Unmarshal(body, &u) != nil {
		http.Error(w, "bad update", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if i := u.UpdateID - s.lo; i >= 0 && i < int64(len(s.recv)) {
		if s.recv[i].IsZero() {
			s.recv[i] = now
			s.count++
			if s.count == len(s.recv) {
				close(s.done)
			}
		} else {
			s.duplicates++
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// naiveForwarder is the baseline: a webhook handler that forwards each
// request to the endpoint straight away and answers Telegram with the
// endpoint's verdict. Nothing is stored: a crash loses what is in flight,
// and an endpoint outage bounces the update back to Telegram.
type naiveForwarder struct {
	*relayServer
	client *http.Client
	target string
}

func startNaiveForwarder(target string, conns int) (*naiveForwarder, error) {
	f := &naiveForwarder{
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns, DisableCompression: true}},
		target: target,
	}
	srv, err := startRelayServer(http.HandlerFunc(f.serve), relayWebhookPath)
	if err != nil {
		return nil, err
	}
	f.relayServer = srv
	return f, nil
}

func (f *naiveForwarder) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Telegram-Bot-Api-Secret-Token") != relaySecret {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, relayMaxBody))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, f.target, bytes.NewReader(body))
	if err != nil {
		http.Error(w, "request", http.StatusInternalServerError)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		http.Error(w, "forward failed", http.StatusBadGateway)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		http.Error(w, "endpoint refused", http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (f *naiveForwarder) close() {
	f.relayServer.close()
	f.client.CloseIdleConnections()
}

// relayLoad plays Telegram's webhook delivery: conns concurrent connections
// posting updates with the secret header.
type relayLoad struct {
	client *http.Client
	conns  int
	chats  int
	nextID int64 // ids never repeat across runs (serve refuses duplicates)
}

func newRelayLoad(conns, chats int) *relayLoad {
	return &relayLoad{
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}},
		conns:  conns,
		chats:  chats,
		nextID: 1,
	}
}

func (g *relayLoad) close() { g.client.CloseIdleConnections() }

// relayResult is one measured run.
type relayResult struct {
	n                   int
	accepted, forwarded time.Duration // until every POST got 200; until the endpoint had every update
	p50, p99            time.Duration // first POST → first arrival at the endpoint
	reposts, duplicates int
	cpu                 relayCPU // CPU spent during the run (set by the scenario)
}

func (r relayResult) rate() float64 { return float64(r.n) / r.forwarded.Seconds() }

// telegramUpdate is a realistic private-chat text message update.
func telegramUpdate(id int64, chat int64) []byte {
	return []byte(`{"update_id":` + strconv.FormatInt(id, 10) +
		`,"message":{"message_id":` + strconv.FormatInt(id, 10) +
		`,"from":{"id":` + strconv.FormatInt(chat, 10) + `,"is_bot":false,"first_name":"User","username":"user` + strconv.FormatInt(chat, 10) + `","language_code":"en"}` +
		`,"chat":{"id":` + strconv.FormatInt(chat, 10) + `,"first_name":"User","username":"user` + strconv.FormatInt(chat, 10) + `","type":"private"}` +
		`,"date":1764400000,"text":"hello from the relay benchmark, message ` + strconv.FormatInt(id, 10) + `"}}`)
}

// nextBatch makes the bodies of n new updates over the load's chats and
// returns them with the first one's id.
func (g *relayLoad) nextBatch(n int) (lo int64, bodies [][]byte) {
	lo = g.nextID
	g.nextID += int64(n)
	bodies = make([][]byte, n)
	for i := range n {
		id := lo + int64(i)
		bodies[i] = telegramUpdate(id, 1000+id%int64(g.chats))
	}
	return lo, bodies
}

// run posts n new updates to url and waits until the sink has them all.
func (g *relayLoad) run(ctx context.Context, sink *relaySink, url string, n int) (relayResult, error) {
	ctx, cancel := context.WithTimeout(ctx, relayRunTimeout)
	defer cancel()
	lo, bodies := g.nextBatch(n)
	done := sink.expect(lo, n)
	sent := make([]time.Time, n)
	var next, reposts atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range g.conns {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				sent[i] = time.Now()
				if err := g.post(ctx, url, bodies[i], &reposts); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	accepted := time.Since(start)
	if firstErr != nil {
		return relayResult{}, firstErr
	}
	select {
	case <-done:
	case <-ctx.Done():
		return relayResult{}, fmt.Errorf("endpoint got %d of %d updates: %w", sink.received(), n, ctx.Err())
	}
	forwarded := time.Since(start)
	sink.mu.Lock()
	lat := make([]time.Duration, n)
	for i := range n {
		lat[i] = sink.recv[i].Sub(sent[i])
	}
	dups := sink.duplicates
	sink.mu.Unlock()
	slices.Sort(lat)
	return relayResult{
		n: n, accepted: accepted, forwarded: forwarded,
		p50: lat[n/2], p99: lat[min(n-1, n*99/100)],
		reposts: int(reposts.Load()), duplicates: dups,
	}, nil
}

func (s *relaySink) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// post delivers one update until it is answered 200, re-posting as Telegram
// would, at most relayMaxPosts times.
func (g *relayLoad) post(ctx context.Context, url string, body []byte, reposts *atomic.Int64) error {
	var last error
	for attempt := range relayMaxPosts {
		if attempt > 0 {
			reposts.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(relayRepostPause):
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", relaySecret)
		resp, err := g.client.Do(req)
		if err != nil {
			last = err
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Errorf("webhook answered %s", resp.Status)
	}
	return errors.Join(errors.New("update never accepted"), last)
}
