package intake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrHeartbeatLapsed is the store error inside the [*OwnershipLostError]
// cause of a handler whose process could not prove its heartbeat within
// [Config.HeartbeatTimeout]: from then on another process may take its
// update over, so the attempt stops.
var ErrHeartbeatLapsed = errors.New("intake: this process's heartbeat lapsed, so other processes may take over its updates")

// heartbeat is one lifecycle's registration in a [ProcessStore]: a fresh
// process id, renewed every Config.HeartbeatInterval. The attempts claimed
// under the id are tracked, and stopped when the heartbeat cannot be proven
// live any longer (the store refused a renewal, or none succeeded before
// the last confirmed end).
type heartbeat struct {
	r     *Runner
	store ProcessStore
	ctx   context.Context // the lifecycle's: its values, cancelled after Close
	kick  chan struct{}   // the lifecycle's catch-up sweep request
	stop  chan struct{}   // closed to end the loop
	done  chan struct{}   // closed when the loop ended

	mu     sync.Mutex
	id     string            // the registered id; "" while none is live
	old    string            // the last id given up, to remove from the store
	until  time.Time         // the last end the store confirmed
	leases map[*lease]string // attempts in flight, with the owner they claimed under
	timer  *time.Timer       // fires at until
}

// newProcessID returns a fresh random process id.
func newProcessID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate process id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// startHeartbeat registers this lifecycle's process and starts renewing it,
// once per lifecycle; it does nothing without a ProcessStore or with
// Config.NoHeartbeat.
func (r *Runner) startHeartbeat(ctx context.Context, rn *run) error {
	if r.procs == nil {
		return nil
	}
	r.mu.Lock()
	started := rn.hb != nil
	r.mu.Unlock()
	if started {
		return nil
	}
	hb := &heartbeat{r: r, store: r.procs, ctx: rn.ctx, kick: rn.kick, stop: make(chan struct{}), done: make(chan struct{}), leases: make(map[*lease]string)}
	if err := hb.register(ctx); err != nil {
		return err
	}
	// Reap before the start-up sweep: a store that can tell a dead
	// predecessor at once (sqlitestore's process locks) hands its updates
	// to this sweep.
	if _, err := hb.store.Reap(ctx, now()); err != nil {
		r.storeError(StepHeartbeat, -1, err)
	}
	r.mu.Lock()
	if rn.hb != nil { // a concurrent start won; ours lapses unused
		r.mu.Unlock()
		hb.mu.Lock()
		hb.timer.Stop()
		hb.mu.Unlock()
		return nil
	}
	rn.hb = hb
	r.mu.Unlock()
	go hb.loop()
	return nil
}

// register takes a fresh process id live through now + HeartbeatTimeout.
func (hb *heartbeat) register(ctx context.Context) error {
	id, err := newProcessID()
	if err != nil {
		return err
	}
	at := now()
	until := at.Add(hb.r.cfg.HeartbeatTimeout)
	ok, err := hb.store.Register(ctx, id, until)
	if err != nil {
		return fmt.Errorf("register process heartbeat: %w", err)
	}
	if !ok {
		return fmt.Errorf("register process heartbeat: the store already knows the fresh id %s", id)
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.id, hb.until = id, until
	if hb.timer == nil {
		hb.timer = time.AfterFunc(until.Sub(now()), hb.deadline)
	} else {
		hb.timer.Reset(until.Sub(now()))
	}
	hb.r.log.Debug("intake: process registered", "process", id)
	return nil
}

// claimAs returns the owner for a claim at t: the process id while its
// heartbeat is proven live, or "" (an ownerless claim, reclaimed only when
// its lease ends) while it is not.
func (hb *heartbeat) claimAs(t time.Time) string {
	if hb == nil {
		return ""
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.id == "" || t.After(hb.until) {
		return ""
	}
	return hb.id
}

// track notes an attempt in flight claimed under owner, or, when the
// heartbeat under which it was claimed lapsed meanwhile, stops it at once.
func (hb *heartbeat) track(l *lease, owner string) {
	if hb == nil || owner == "" {
		return
	}
	hb.mu.Lock()
	if hb.id == owner {
		hb.leases[l] = owner
		hb.mu.Unlock()
		return
	}
	hb.mu.Unlock()
	hb.r.loseToHeartbeat(l)
}

// untrack forgets an attempt that ended.
func (hb *heartbeat) untrack(l *lease) {
	if hb == nil {
		return
	}
	hb.mu.Lock()
	delete(hb.leases, l)
	hb.mu.Unlock()
}

// lapse gives up the current id: every attempt claimed under it is
// stopped, since another process may take it over now.
func (hb *heartbeat) lapse(why string) {
	hb.mu.Lock()
	id := hb.id
	if id == "" {
		hb.mu.Unlock()
		return
	}
	hb.id, hb.old = "", id
	var lost []*lease
	for l, owner := range hb.leases {
		if owner == id {
			lost = append(lost, l)
			delete(hb.leases, l)
		}
	}
	hb.mu.Unlock()
	hb.r.log.Warn("intake: process heartbeat lapsed; stopping its attempts", "process", id, "why", why, "attempts", len(lost))
	for _, l := range lost {
		hb.r.loseToHeartbeat(l)
	}
}

// deadline fires when the last confirmed heartbeat ends.
func (hb *heartbeat) deadline() {
	hb.mu.Lock()
	live := hb.id != "" && now().Before(hb.until)
	hb.mu.Unlock()
	if !live {
		hb.lapse("no renewal succeeded before its end")
	}
}

// loop renews the heartbeat every HeartbeatInterval, registers a new id
// when the old one lapsed, and reaps lapsed processes, asking for a sweep
// when it reaped some, until stop is closed.
func (hb *heartbeat) loop() {
	defer close(hb.done)
	cfg := hb.r.cfg
	t := time.NewTicker(cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-hb.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(hb.ctx, cfg.HeartbeatTimeout)
		hb.beat(ctx)
		cancel()
	}
}

// beat is one round of the loop.
func (hb *heartbeat) beat(ctx context.Context) {
	hb.mu.Lock()
	id, old := hb.id, hb.old
	hb.mu.Unlock()
	if old != "" {
		// A late renewal may have kept the id given up alive in the store;
		// remove it, so that its rows, whose attempts were stopped, are
		// claimable at once.
		if _, err := hb.store.Leave(ctx, old); err != nil {
			hb.r.storeError(StepHeartbeat, -1, err)
		} else {
			hb.mu.Lock()
			if hb.old == old {
				hb.old = ""
			}
			hb.mu.Unlock()
		}
	}
	if id == "" {
		if err := hb.register(ctx); err != nil {
			hb.r.storeError(StepHeartbeat, -1, err)
			return
		}
	} else {
		at := now()
		until := at.Add(hb.r.cfg.HeartbeatTimeout)
		ok, err := hb.store.Beat(ctx, id, until, at)
		switch {
		case err != nil:
			// Keep the last proven end: the heartbeat may still be live.
			hb.r.storeError(StepHeartbeat, -1, err)
		case ok:
			hb.mu.Lock()
			if hb.id == id && until.After(hb.until) {
				hb.until = until
				hb.timer.Reset(until.Sub(now()))
			}
			hb.mu.Unlock()
		default:
			hb.lapse("the store refused its renewal")
		}
	}
	n, err := hb.store.Reap(ctx, now())
	if err != nil {
		hb.r.storeError(StepHeartbeat, -1, err)
		return
	}
	if n > 0 {
		// Some process died: its rows are claimable now, not at the next
		// periodic sweep.
		select {
		case hb.kick <- struct{}{}:
		default:
		}
	}
}

// end stops the loop; after a complete drain (leave) it removes the
// heartbeat so that nothing waits for it to lapse.
func (hb *heartbeat) end(ctx context.Context, leave bool) {
	close(hb.stop)
	select {
	case <-hb.done:
	case <-ctx.Done():
		// A renewal hangs in the store: leave it to end with the
		// lifecycle's context, and the heartbeat to lapse.
		leave = false
	}
	hb.mu.Lock()
	id := hb.id
	hb.id = ""
	hb.timer.Stop()
	hb.mu.Unlock()
	if !leave || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hb.r.cfg.HeartbeatTimeout)
	defer cancel()
	if _, err := hb.store.Leave(ctx, id); err != nil {
		hb.r.storeError(StepHeartbeat, -1, err)
	}
}

// loseToHeartbeat stops attempt l because its process's heartbeat lapsed.
func (r *Runner) loseToHeartbeat(l *lease) {
	l.mu.Lock()
	lost := l.active && l.loseLocked(ErrHeartbeatLapsed)
	l.mu.Unlock()
	if lost {
		r.leaseLost(l.id)
	}
}
