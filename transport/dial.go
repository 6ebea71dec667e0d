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

	var pending4, pending6 []netip.Addr
	lookups := 0
	lookupCh := make(chan lookupResult, 2) // buffered: lookups never block after we return
	if ip, err := netip.ParseAddr(trimBrackets(host)); err == nil {
		ip = ip.Unmap()
		if ip.Is4() {
			pending4 = append(pending4, ip)
		} else {
			pending6 = append(pending6, ip)
		}
	} else {
		for _, fam := range []string{"ip6", "ip4"} {
			if fam == "ip6" && network == "tcp4" || fam == "ip4" && network == "tcp6" {
				continue
			}
			lookups++
			go func() {
				addrs, err := t.cfg.LookupFunc(ctx, fam, host)
				lookupCh <- lookupResult{v6: fam == "ip6", addrs: addrs, err: err}
			}()
		}
	}

	results := make(chan attemptResult)
	inflight := 0
	nextV6 := true
	begun := false
	got6 := false
	var lookupErrs []error
	var lastErr error
	lastStage := StageConnect
	reached := &furthest{}
	reached.enter(StageConnect)

	attemptTimer := time.NewTimer(time.Hour)
	attemptTimer.Stop()
	defer attemptTimer.Stop()
	resTimer := time.NewTimer(time.Hour)
	resTimer.Stop()
	defer resTimer.Stop()
	resExpired := false

	startNext := func() {
		var a netip.Addr
		switch {
		case nextV6 && len(pending6) > 0 || len(pending4) == 0 && len(pending6) > 0:
			a, pending6 = pending6[0], pending6[1:]
			nextV6 = false
		case len(pending4) > 0:
			a, pending4 = pending4[0], pending4[1:]
			nextV6 = true
		default:
			return
		}
		begun = true
		inflight++
		attemptTimer.Reset(t.cfg.AttemptDelay)
		addr := netip.AddrPortFrom(a, uint16(portNum)).String()
		go func() {
			results <- t.attempt(ctx, addr, finish, reached.enter)
		}()
	}
	// abandon hands the in-flight attempts to a goroutine that closes any
	// connection they still produce.
	abandon := func() {
		if inflight == 0 {
			return
		}
		n := inflight
		go func() {
			for range n {
				if r := <-results; r.conn != nil {
					r.conn.Close()
				}
			}
		}()
		inflight = 0
	}

	for {
		havePending := len(pending4)+len(pending6) > 0
		if !begun && havePending && (lookups == 0 || got6 || resExpired) {
			startNext()
			continue
		}
		if begun && inflight == 0 && havePending {
			startNext() // an address arrived, or the last attempt failed
			continue
		}
		if inflight == 0 && !havePending && lookups == 0 {
			if !begun {
				err := ErrNoAddress
				if len(lookupErrs) > 0 {
					err = fmt.Errorf("transport: lookup failed: %w", errors.Join(lookupErrs...))
				}
				return nil, &NotDispatchedError{Stage: StageLookup, Err: err}
			}
			return nil, &NotDispatchedError{Stage: lastStage, Err: fmt.Errorf("transport: no connection established: %w", lastErr)}
		}
		select {
		case r := <-lookupCh:
			lookups--
			if r.err != nil {
				lookupErrs = append(lookupErrs, r.err)
			}
			if r.v6 {
				got6 = true
				pending6 = append(pending6, unmapAll(r.addrs)...)
			} else {
				pending4 = append(pending4, unmapAll(r.addrs)...)
				if lookups > 0 && !begun {
					resTimer.Reset(t.cfg.ResolutionDelay)
				}
			}
		case <-resTimer.C:
			resExpired = true
		case <-attemptTimer.C:
			startNext()
		case r := <-results:
			inflight--
			if r.err == nil {
				abandon()
				return r.conn, nil
			}
			if lastErr == nil || stageRank(r.stage) >= stageRank(lastStage) {
				lastStage, lastErr = r.stage, r.err
			}
			startNext() // a failure starts the next attempt at once
		case <-ctx.Done():
			abandon()
			stage := lastStage
			if r := reached.stage(); stageRank(r) > stageRank(stage) {
				stage = r
			}
			if !begun {
				stage = StageLookup
			}
			cause := context.Cause(ctx)
			if lastErr != nil {
				cause = fmt.Errorf("%w; last attempt: %v", cause, lastErr)
			}
			return nil, &NotDispatchedError{Stage: stage, Err: cause}
		}
	}
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
