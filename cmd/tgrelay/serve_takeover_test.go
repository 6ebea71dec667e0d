package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/wire"
)

// takeoverLimit bounds how long after a kill -9 the dead process's updates
// may take to be forwarded again in these tests: well below the 120 s lease
// they were claimed under, so only a takeover by heartbeat passes. The goal
// with defaults (10 s heartbeat timeout, 3 s renewals) is 15 s; the time
// measured is logged.
const takeoverLimit = 60 * time.Second

// holdingEndpoint is a bot endpoint that holds the first forward of chosen
// updates open until the client goes away (its process was killed), and
// answers 200 to everything else, recording when each update was forwarded
// with which attempt.
type holdingEndpoint struct {
	*botEndpoint
	mu    sync.Mutex
	hold  map[int64]bool
	held  map[int64]bool      // a first forward of the update is being held
	again map[int64]time.Time // when an update was forwarded with attempt > 1
}

func newHoldingEndpoint(t *testing.T) *holdingEndpoint {
	t.Helper()
	h := &holdingEndpoint{hold: map[int64]bool{}, held: map[int64]bool{}, again: map[int64]time.Time{}}
	h.botEndpoint = newBotEndpoint(t, nil)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for handlers
	inner := h.botEndpoint.srv.Config.Handler
	h.botEndpoint.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.Header.Get(wire.HeaderUpdateID), 10, 64)
		attempt, _ := strconv.Atoi(r.Header.Get(wire.HeaderAttempt))
		h.mu.Lock()
		hold := h.hold[id] && attempt == 1
		if hold {
			h.held[id] = true
		}
		if attempt > 1 {
			if _, ok := h.again[id]; !ok {
				h.again[id] = time.Now()
			}
		}
		h.mu.Unlock()
		if hold {
			// Read the body first: only then does the server notice the
			// client going away.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done(): // the forwarding process died
			case <-release:
			}
			return
		}
		inner.ServeHTTP(w, r)
	})
	return h
}

func (h *holdingEndpoint) holdFirst(id int64) {
	h.mu.Lock()
	h.hold[id] = true
	h.mu.Unlock()
}

func (h *holdingEndpoint) heldCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// reforwarded returns, for every held update, when it was forwarded again
// (the zero time while it was not).
func (h *holdingEndpoint) reforwarded() map[int64]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int64]time.Time{}
	for id := range h.held {
		out[id] = h.again[id]
	}
	return out
}

// postUpdate delivers one update to a serve's webhook, as Telegram (behind a
// load balancer) would. Every update has a chat of its own, so none waits
// on its chat's line behind a held one.
func postUpdate(t *testing.T, webhook string, id int64) {
	t.Helper()
	body := fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"date":1,"chat":{"id":%d,"type":"private"},"text":"hi"}}`, id, id, 1000+id)
	req, err := http.NewRequest(http.MethodPost, webhook, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(intake.SecretHeader, testSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST update %d to %s: %v", id, webhook, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST update %d to %s: %s", id, webhook, resp.Status)
	}
}

// waitTakeover waits until every held update was forwarded again, and
// returns the longest time from since to a re-forward.
func waitTakeover(t *testing.T, ep *holdingEndpoint, since time.Time, procs ...*serveProc) time.Duration {
	t.Helper()
	deadline := since.Add(2 * takeoverLimit)
	for {
		var worst time.Duration
		done := true
		early := 0
		for _, at := range ep.reforwarded() {
			if at.IsZero() {
				done = false
				break
			}
			if at.Before(since) {
				early++
			}
			worst = max(worst, at.Sub(since))
		}
		if done {
			if early > 0 {
				t.Errorf("%d held updates were forwarded again before the kill: the test did not hold them until it", early)
			}
			return worst
		}
		if time.Now().After(deadline) {
			for _, p := range procs {
				t.Logf("serve stderr:\n%s", p.stderr)
			}
			t.Fatalf("held updates not forwarded again within %v: %v", 2*takeoverLimit, ep.reforwarded())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeKillOneOfThreeOnPostgres runs three serves on one PostgreSQL,
// delivers a stream of updates to all three round robin, and kill -9s one
// while it holds forwards mid-stream under the default 120 s lease. The
// two others forward its updates again within the heartbeat timeout and one
// sweep, and every update of the stream ends completed.
func TestServeKillOneOfThreeOnPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	srv := serveFakeTelegram(t)
	ep := newHoldingEndpoint(t)
	var procs []*serveProc
	var hooks []string
	for range 3 {
		addr := testkit.FreeAddr(t)
		procs = append(procs, startServeProc(t, []string{"TGRELAY_WEBHOOK_SECRET=" + testSecret},
			"--token", srv.Token, "--api-root", srv.URL, "--db", db, "--listen", addr, "--forward", ep.url(),
			"--webhook-check-interval", "0"))
		hooks = append(hooks, "http://"+addr+"/telegram")
	}
	victim := 0
	const total = 60
	id := int64(1)
	for ; id <= total/2; id++ {
		i := int(id) % 3
		if i == victim {
			ep.holdFirst(id)
		}
		postUpdate(t, hooks[i], id)
	}
	serveWaitFor(t, "the victim to hold its forwards", func() bool { return ep.heldCount() == total/2/3 }, procs...)
	procs[victim].kill()
	killed := time.Now()
	for ; id <= total; id++ { // the stream goes on to the survivors
		postUpdate(t, hooks[1+int(id)%2], id)
	}
	took := waitTakeover(t, ep, killed, procs[1:]...)
	t.Logf("the killed serve's %d held updates were forwarded again at most %v after the kill (goal 15s)", ep.heldCount(), took.Round(time.Millisecond))
	if took > takeoverLimit {
		t.Errorf("takeover took %v; want well below the 120s lease (at most %v)", took, takeoverLimit)
	}
	serveWaitFor(t, "every update forwarded", func() bool { return ep.distinct() == total }, procs[1:]...)
	st, err := openStore(t.Context(), db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	serveWaitFor(t, "every row completed", func() bool {
		s, err := st.Stats(t.Context())
		return err == nil && s.Count[intake.StateCompleted] == total
	}, procs[1:]...)
	for held := range ep.reforwarded() {
		if hs := ep.hitsOf(held); len(hs) == 0 || hs[len(hs)-1].attempt != 2 {
			t.Errorf("held update %d completed by forwards %v; want attempt 2", held, hs)
		}
		// The kill was a crash, not an attempt of the update's own.
		if row, ok, err := st.Get(t.Context(), held); err != nil || !ok || row.Crashes != 1 {
			t.Errorf("held update %d: crashes %d (%v, %v); want 1", held, row.Crashes, ok, err)
		}
	}
}

// TestServeRestartAfterKillOnSQLite kill -9s a serve on SQLite while it
// holds forwards under the default 120 s lease, and restarts it at once:
// the restarted serve finds its predecessor's process lock free, so it
// forwards them again as it starts, before the dead heartbeat could even
// lapse, not at the lease's end.
func TestServeRestartAfterKillOnSQLite(t *testing.T) {
	t.Parallel()
	srv := serveFakeTelegram(t)
	ep := newHoldingEndpoint(t)
	db := filepath.Join(t.TempDir(), "relay.db")
	addr := testkit.FreeAddr(t)
	args := []string{"--token", srv.Token, "--api-root", srv.URL, "--db", db, "--listen", addr, "--forward", ep.url(),
		"--webhook-check-interval", "0"}
	env := []string{"TGRELAY_WEBHOOK_SECRET=" + testSecret}
	r := startServeProc(t, env, args...)
	hook := "http://" + addr + "/telegram"
	const total = 8
	for id := int64(1); id <= total; id++ {
		ep.holdFirst(id)
		postUpdate(t, hook, id)
	}
	serveWaitFor(t, "the forwards to be held", func() bool { return ep.heldCount() == total }, r)
	r.kill()
	killed := time.Now()
	r = startServeProc(t, env, args...)
	took := waitTakeover(t, ep, killed, r)
	t.Logf("the restarted serve forwarded its predecessor's %d held updates again at most %v after the kill", total, took.Round(time.Millisecond))
	if took > intake.DefaultHeartbeatTimeout {
		t.Errorf("takeover after the restart took %v; want it before the dead heartbeat lapses (%v)", took, intake.DefaultHeartbeatTimeout)
	}
	serveWaitFor(t, "every update forwarded", func() bool { return ep.distinct() == total }, r)
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit: %v", err)
	}
	st, err := openStore(t.Context(), db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := st.Stats(t.Context())
	if err != nil || s.Count[intake.StateCompleted] != total {
		t.Errorf("stats after the restart: %v, %v; want %d completed", s.Count, err, total)
	}
}
