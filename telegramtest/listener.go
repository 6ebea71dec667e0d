package telegramtest

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// switchListener is the server's listener. While an [FaultUnreachable]
// outage lasts its socket is closed, so the kernel refuses connection
// attempts and no request byte can reach the server; afterwards it listens
// on the same address again. It also resets connections while a
// [FaultRefuseConnection] is armed.
type switchListener struct {
	s    *Server
	addr net.Addr

	mu     sync.Mutex
	cur    net.Listener  // nil while down
	up     chan struct{} // closed when listening again
	closed bool
	gen    uint64 // bumped by every outage

	connMu  sync.Mutex
	conns   map[net.Conn]http.ConnState
	stateCh chan struct{} // closed and replaced on every state change

	// handlers counts requests being handled; a connection active beyond
	// them has just answered and is about to turn idle.
	handlers atomic.Int64
}

func newSwitchListener(s *Server, l net.Listener) *switchListener {
	up := make(chan struct{})
	close(up)
	return &switchListener{s: s, addr: l.Addr(), cur: l, up: up, conns: map[net.Conn]http.ConnState{}, stateCh: make(chan struct{})}
}

func (l *switchListener) Addr() net.Addr { return l.addr }

func (l *switchListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		cur, up, closed := l.cur, l.up, l.closed
		l.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		if cur == nil {
			<-up
			continue
		}
		c, err := cur.Accept()
		if err != nil {
			l.mu.Lock()
			taken := l.cur != cur && !l.closed
			l.mu.Unlock()
			if taken {
				continue // an outage closed this socket
			}
			return nil, err
		}
		if l.s.takeConnFault() {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			c.Close()
			continue
		}
		return c, nil
	}
}

func (l *switchListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	select {
	case <-l.up:
	default:
		close(l.up)
	}
	if l.cur != nil {
		return l.cur.Close()
	}
	return nil
}

// connState tracks connections, so an outage can drop the idle ones and
// every connection that becomes idle while it lasts.
func (l *switchListener) connState(c net.Conn, st http.ConnState) {
	if st == http.StateIdle && l.down() {
		c.Close() // before anyone waiting on the state change wakes
	}
	l.connMu.Lock()
	if st == http.StateClosed || st == http.StateHijacked {
		delete(l.conns, c)
	} else {
		l.conns[c] = st
	}
	close(l.stateCh)
	l.stateCh = make(chan struct{})
	l.connMu.Unlock()
}

func (l *switchListener) down() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur == nil && !l.closed
}

// outage closes the socket and the idle connections for d, then listens
// again on the same address. An outage during an outage extends it.
func (l *switchListener) outage(d time.Duration) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.gen++
	gen := l.gen
	if l.cur != nil {
		l.cur.Close()
		l.cur = nil
		l.up = make(chan struct{})
	}
	l.mu.Unlock()
	l.connMu.Lock()
	for c, st := range l.conns {
		if st == http.StateIdle || st == http.StateNew {
			c.Close()
		}
	}
	l.connMu.Unlock()
	l.awaitAnswered()
	l.s.wg.Add(1)
	go func() {
		defer l.s.wg.Done()
		if l.s.sleep(l.s.ctx, d) != nil {
			return
		}
		l.reopen(gen)
	}()
}

// maxAnsweredWait bounds how long an outage waits for connections that
// have answered to turn idle.
const maxAnsweredWait = time.Second

// awaitAnswered waits (bounded) until every active connection is one whose
// request is still being handled: a connection whose answer was just
// written turns idle, and is closed then, before the outage is in force, so
// its client cannot reuse it for a request that would then be cut off.
func (l *switchListener) awaitAnswered() {
	t := time.NewTimer(maxAnsweredWait)
	defer t.Stop()
	for {
		l.connMu.Lock()
		active := 0
		for _, st := range l.conns {
			if st == http.StateActive {
				active++
			}
		}
		ch := l.stateCh
		l.connMu.Unlock()
		if int64(active) <= l.handlers.Load() {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-l.s.ctx.Done():
			return
		}
	}
}

// reopen listens again, unless a later outage or Close took over. The
// port was just released, so a failure is retried for a while.
func (l *switchListener) reopen(gen uint64) {
	for i := 0; ; i++ {
		l.mu.Lock()
		if l.closed || l.gen != gen {
			l.mu.Unlock()
			return
		}
		nl, err := net.Listen(l.addr.Network(), l.addr.String())
		if err == nil {
			l.cur = nl
			close(l.up)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		if i == 200 {
			l.s.logf("telegramtest: cannot listen on %s again after an outage: %v", l.addr, err)
			return
		}
		if l.s.sleep(l.s.ctx, 10*time.Millisecond) != nil {
			return
		}
	}
}

// endOutage ends an outage now, if one lasts: the server listens again.
func (l *switchListener) endOutage() {
	l.mu.Lock()
	down := l.cur == nil && !l.closed
	l.gen++
	gen := l.gen
	l.mu.Unlock()
	if down {
		l.reopen(gen)
	}
}
