package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"
)

// finishFunc completes one connection attempt on a connected TCP socket
// (proxy CONNECT, TLS handshake). It returns the usable connection, or the
// stage and cause of its failure; on failure it has closed raw.
// progress reports the stage an attempt has entered, so that a budget
// running out mid-handshake is reported at that stage.
type finishFunc func(ctx context.Context, raw *countingConn, progress func(Stage)) (net.Conn, Stage, error)

type lookupResult struct {
	v6    bool
	addrs []netip.Addr
	err   error
}

type attemptResult struct {
	conn  net.Conn
	stage Stage
	err   error
}

// stageRank orders stages by how far a request got, to report the
// furthest failure when every attempt failed.
func stageRank(s Stage) int {
	switch s {
	case StageLookup:
		return 1
	case StageConnect:
		return 2
	case StageProxy:
		return 3
	case StageTLS:
		return 4
	}
	return 0
}

var stagesByRank = []Stage{StageRequest, StageLookup, StageConnect, StageProxy, StageTLS}

// furthest tracks the furthest stage any attempt has entered.
type furthest struct{ rank atomic.Int32 }

func (f *furthest) enter(s Stage) {
	r := int32(stageRank(s))
	for {
		old := f.rank.Load()
		if old >= r || f.rank.CompareAndSwap(old, r) {
			return
		}
	}
}

func (f *furthest) stage() Stage { return stagesByRank[f.rank.Load()] }

// DialContext resolves address ("host:port") and races TCP connections to
// its addresses as RFC 8305 describes, within Config.ConnectTimeout, using
// the configured LookupFunc and DialFunc. network must be "tcp", "tcp4" or
// "tcp6". A failure is a [*NotDispatchedError] with stage lookup or connect.
// It is the dialer RoundTrip uses, exposed for other clients (for example as
// an [net/http.Transport.DialContext]).
func (t *Transport) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &NotDispatchedError{Stage: StageRequest, Err: fmt.Errorf("transport: invalid address: %w", err)}
	}
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &NotDispatchedError{Stage: StageRequest, Err: fmt.Errorf("transport: unsupported network %q", network)}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, t.cfg.ConnectTimeout, t.budgetErr())
	defer cancel()
	c, err := t.race(ctx, network, host, port, nil)
	if err != nil {
		return nil, err
	}
	return c.(*countingConn).Conn, nil
}

func (t *Transport) budgetErr() error {
	return fmt.Errorf("%w (%v): %w", ErrConnectTimeout, t.cfg.ConnectTimeout, context.DeadlineExceeded)
}

// race resolves host and races connection attempts (RFC 8305): A and AAAA
// are looked up concurrently, with ResolutionDelay for a late AAAA; address
// families alternate, IPv6 first; a new attempt starts every AttemptDelay
// without cancelling earlier ones, and at once when an attempt fails; the
// first attempt to finish (finish included) wins and the others are closed.
// ctx carries the connect budget. Every failure is a *NotDispatchedError.
func (t *Transport) race(ctx context.Context, network, host, port string, finish finishFunc) (net.Conn, error) {
	portNum, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, &NotDispatchedError{Stage: StageRequest, Err: fmt.Errorf("transport: invalid port %q", port)}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends losing attempts and pending lookups
	r := newRacer(ctx, t, uint16(portNum), finish)
	defer r.stopTimers()
	r.resolve(network, host)
	return r.run()
}

// racer is the state of one race. Only the goroutine running [racer.run]
// touches it; lookups and attempts report back over channels.
type racer struct {
	t       *Transport
	ctx     context.Context
	port    uint16
	finish  finishFunc
	reached furthest // the furthest stage any attempt has entered

	// Addresses not yet tried, and which family goes next.
	pending4, pending6 []netip.Addr
	nextV6             bool

	// Lookups.
	lookups    int               // still running
	lookupCh   chan lookupResult // buffered: lookups never block after the race
	got6       bool              // the AAAA answer arrived
	resExpired bool              // ResolutionDelay passed after the A answer
	lookupErrs []error
	resTimer   *time.Timer

	// Attempts.
	results      chan attemptResult
	inflight     int
	begun        bool  // an attempt has started
	lastErr      error // the failure that got furthest
	lastStage    Stage
	attemptTimer *time.Timer // the next attempt's start
}

func newRacer(ctx context.Context, t *Transport, port uint16, finish finishFunc) *racer {
	r := &racer{
		t: t, ctx: ctx, port: port, finish: finish,
		nextV6:       true,
		lookupCh:     make(chan lookupResult, 2),
		results:      make(chan attemptResult),
		lastStage:    StageConnect,
		attemptTimer: stoppedTimer(),
		resTimer:     stoppedTimer(),
	}
	r.reached.enter(StageConnect)
	return r
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

func (r *racer) stopTimers() {
	r.attemptTimer.Stop()
	r.resTimer.Stop()
}

// resolve queues host when it is an IP literal of a family network allows
// (one it excludes leaves no address, as for net.Dialer), else starts the A
// and AAAA lookups network allows.
func (r *racer) resolve(network, host string) {
	if ip, err := netip.ParseAddr(trimBrackets(host)); err == nil {
		switch ip = ip.Unmap(); {
		case ip.Is4() && network != "tcp6":
			r.pending4 = append(r.pending4, ip)
		case !ip.Is4() && network != "tcp4":
			r.pending6 = append(r.pending6, ip)
		}
		return
	}
	for _, fam := range []string{"ip6", "ip4"} {
		if fam == "ip6" && network == "tcp4" || fam == "ip4" && network == "tcp6" {
			continue
		}
		r.lookups++
		go func() {
			addrs, err := r.t.cfg.LookupFunc(r.ctx, fam, host)
			r.lookupCh <- lookupResult{v6: fam == "ip6", addrs: addrs, err: err}
		}()
	}
}

// run drives the race until an attempt wins, every address failed, or the
// budget ends.
func (r *racer) run() (net.Conn, error) {
	for {
		if r.shouldStart() {
			r.startNext()
			continue
		}
		if r.exhausted() {
			return nil, r.exhaustedErr()
		}
		select {
		case l := <-r.lookupCh:
			r.addLookup(l)
		case <-r.resTimer.C:
			r.resExpired = true
		case <-r.attemptTimer.C:
			r.startNext()
		case a := <-r.results:
			r.inflight--
			if a.err == nil {
				r.abandon()
				return a.conn, nil
			}
			r.recordFailure(a)
			r.startNext() // a failure starts the next attempt at once
		case <-r.ctx.Done():
			r.abandon()
			return nil, r.budgetErr()
		}
	}
}

func (r *racer) havePending() bool { return len(r.pending4)+len(r.pending6) > 0 }

// shouldStart reports whether an attempt starts now without waiting: the
// first one once the AAAA answer is in (or not coming, or late), a later one
// when none is in flight (an address arrived, or the last attempt failed).
func (r *racer) shouldStart() bool {
	if !r.havePending() {
		return false
	}
	if !r.begun {
		return r.lookups == 0 || r.got6 || r.resExpired
	}
	return r.inflight == 0
}

// exhausted reports whether nothing is left to wait for.
func (r *racer) exhausted() bool {
	return r.inflight == 0 && !r.havePending() && r.lookups == 0
}

// startNext starts an attempt to the next address, alternating families
// (IPv6 first), and re-arms the attempt timer. It does nothing when no
// address is pending.
func (r *racer) startNext() {
	var a netip.Addr
	switch {
	case r.nextV6 && len(r.pending6) > 0 || len(r.pending4) == 0 && len(r.pending6) > 0:
		a, r.pending6 = r.pending6[0], r.pending6[1:]
		r.nextV6 = false
	case len(r.pending4) > 0:
		a, r.pending4 = r.pending4[0], r.pending4[1:]
		r.nextV6 = true
	default:
		return
	}
	r.begun = true
	r.inflight++
	r.attemptTimer.Reset(r.t.cfg.AttemptDelay)
	addr := netip.AddrPortFrom(a, r.port).String()
	go func() {
		r.results <- r.t.attempt(r.ctx, addr, r.finish, r.reached.enter)
	}()
}

// addLookup queues a lookup's addresses. An A answer arriving before any
// attempt, while AAAA is still out, gives AAAA ResolutionDelay more.
func (r *racer) addLookup(l lookupResult) {
	r.lookups--
	if l.err != nil {
		r.lookupErrs = append(r.lookupErrs, l.err)
	}
	if l.v6 {
		r.got6 = true
		r.pending6 = append(r.pending6, unmapAll(l.addrs)...)
		return
	}
	r.pending4 = append(r.pending4, unmapAll(l.addrs)...)
	if r.lookups > 0 && !r.begun {
		r.resTimer.Reset(r.t.cfg.ResolutionDelay)
	}
}

// recordFailure keeps the failed attempt that got furthest (the latest of
// equals).
func (r *racer) recordFailure(a attemptResult) {
	if r.lastErr == nil || stageRank(a.stage) >= stageRank(r.lastStage) {
		r.lastStage, r.lastErr = a.stage, a.err
	}
}

// abandon hands the in-flight attempts to a goroutine that closes any
// connection they still produce.
func (r *racer) abandon() {
	if r.inflight == 0 {
		return
	}
	n, results := r.inflight, r.results
	go func() {
		for range n {
			if a := <-results; a.conn != nil {
				a.conn.Close()
			}
		}
	}()
	r.inflight = 0
}

// exhaustedErr is the failure when every address failed, or none was found.
func (r *racer) exhaustedErr() error {
	if !r.begun {
		err := ErrNoAddress
		if len(r.lookupErrs) > 0 {
			err = fmt.Errorf("transport: lookup failed: %w", errors.Join(r.lookupErrs...))
		}
		return &NotDispatchedError{Stage: StageLookup, Err: err}
	}
	return &NotDispatchedError{Stage: r.lastStage, Err: fmt.Errorf("transport: no connection established: %w", r.lastErr)}
}

// budgetErr is the failure when the context ended first: at the furthest
// stage any attempt reached (lookup when none began), with the last
// attempt's failure.
func (r *racer) budgetErr() error {
	stage := r.lastStage
	if s := r.reached.stage(); stageRank(s) > stageRank(stage) {
		stage = s
	}
	if !r.begun {
		stage = StageLookup
	}
	cause := context.Cause(r.ctx)
	if r.lastErr != nil {
		cause = fmt.Errorf("%w; last attempt: %v", cause, r.lastErr)
	}
	return &NotDispatchedError{Stage: stage, Err: cause}
}

// attempt dials one address and finishes the connection.
func (t *Transport) attempt(ctx context.Context, addr string, finish finishFunc, progress func(Stage)) attemptResult {
	c, err := t.cfg.DialFunc(ctx, "tcp", addr)
	if err != nil {
		return attemptResult{stage: StageConnect, err: err}
	}
	if ctx.Err() != nil {
		c.Close()
		return attemptResult{stage: StageConnect, err: context.Cause(ctx)}
	}
	cc := &countingConn{Conn: c}
	if finish == nil {
		return attemptResult{conn: cc}
	}
	conn, stage, err := finish(ctx, cc, progress)
	if err != nil {
		return attemptResult{stage: stage, err: err}
	}
	return attemptResult{conn: conn}
}

func unmapAll(addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.Unmap())
	}
	return out
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}
