package h1client

import (
	"sync"
	"time"
)

// PoolConfig configures a [Pool].
type PoolConfig[C any] struct {
	// Max bounds the idle connections kept; one more is closed.
	Max int
	// IdleTimeout is how long a connection may wait idle for reuse.
	IdleTimeout time.Duration
	// Usable reports whether an idle connection can still carry a
	// request (typically [Closed] and the reader's buffer).
	Usable func(C) bool
	// Close closes a connection the pool lets go.
	Close func(C)
	// Reap closes connections idle for IdleTimeout as they expire, on a
	// timer. Without it they are closed only when Get meets them, or by
	// CloseIdle.
	Reap bool
	// Now replaces time.Now for idle expiry. Nil means time.Now.
	Now func() time.Time
}

// Pool holds the idle keep-alive connections to one destination. Get
// lends the most recently used one that is still usable; Put returns
// one. It is safe for concurrent use.
type Pool[C any] struct {
	cfg PoolConfig[C]

	mu     sync.Mutex
	idle   []idleConn[C] // oldest first
	reaper *time.Timer   // set while Reap and connections wait
}

type idleConn[C any] struct {
	conn  C
	since time.Time
}

// NewPool returns an empty pool.
func NewPool[C any](cfg PoolConfig[C]) *Pool[C] {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pool[C]{cfg: cfg}
}

// Get takes the most recently used idle connection that has not waited
// IdleTimeout and is still usable, closing the others it meets. ok is
// false when there is none.
func (p *Pool[C]) Get() (c C, ok bool) {
	now := p.cfg.Now()
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		ic := p.idle[n-1]
		p.idle[n-1] = idleConn[C]{}
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if now.Sub(ic.since) < p.cfg.IdleTimeout && p.cfg.Usable(ic.conn) {
			return ic.conn, true
		}
		p.cfg.Close(ic.conn)
		p.mu.Lock()
	}
	p.mu.Unlock()
	return c, false
}

// Put returns c to the pool, or closes it when the pool is full.
func (p *Pool[C]) Put(c C) {
	now := p.cfg.Now()
	p.mu.Lock()
	if len(p.idle) >= p.cfg.Max {
		p.mu.Unlock()
		p.cfg.Close(c)
		return
	}
	p.idle = append(p.idle, idleConn[C]{c, now})
	if p.cfg.Reap && p.reaper == nil {
		p.reaper = time.AfterFunc(p.cfg.IdleTimeout, p.reap)
	}
	p.mu.Unlock()
}

// reap closes the connections idle for IdleTimeout, and runs again when
// the oldest left will be.
func (p *Pool[C]) reap() {
	now := p.cfg.Now()
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].since) >= p.cfg.IdleTimeout {
		n++
	}
	stale := append([]idleConn[C](nil), p.idle[:n]...)
	p.idle = append(p.idle[:0], p.idle[n:]...)
	clear(p.idle[len(p.idle):cap(p.idle)])
	switch {
	case len(p.idle) == 0:
		p.reaper = nil
	case p.reaper != nil:
		p.reaper.Reset(p.cfg.IdleTimeout - now.Sub(p.idle[0].since))
	}
	p.mu.Unlock()
	for _, ic := range stale {
		p.cfg.Close(ic.conn)
	}
}

// CloseIdle closes every idle connection. Connections lent out are not
// affected and may be Put back later.
func (p *Pool[C]) CloseIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if p.reaper != nil {
		p.reaper.Stop()
		p.reaper = nil
	}
	p.mu.Unlock()
	for _, ic := range idle {
		p.cfg.Close(ic.conn)
	}
}

// Idle returns the idle connections, oldest first: a snapshot, for tests
// and diagnostics.
func (p *Pool[C]) Idle() []C {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]C, len(p.idle))
	for i, ic := range p.idle {
		out[i] = ic.conn
	}
	return out
}
