package main

import (
	"net"
	"sync"
)

// stallProxy forwards TCP connections to a target and can stop forwarding
// bytes, in both directions, while keeping every connection open: a
// database or endpoint that stops answering without closing anything.
// Connections accepted while stalled are dialled but carry nothing until
// the stall ends.
type stallProxy struct {
	ln   net.Listener
	dial func() (net.Conn, error)
	done chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	closed  bool
	conns   map[net.Conn]struct{}
}

func startStallProxy(dial func() (net.Conn, error)) (*stallProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &stallProxy{ln: ln, dial: dial, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

// stall stops forwarding until resume.
func (p *stallProxy) stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

func (p *stallProxy) resume() {
	p.mu.Lock()
	p.stalled = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// close ends the listener and every connection.
func (p *stallProxy) close() {
	p.ln.Close()
	<-p.done
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *stallProxy) accept() {
	defer close(p.done)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *stallProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *stallProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *stallProxy) serve(c net.Conn) {
	t, err := p.dial()
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, t) {
		c.Close()
		t.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(t, c) })
	wg.Go(func() { p.pipe(c, t) })
	wg.Wait()
	p.untrack(c, t)
}

// pipe copies src to dst, holding each chunk while stalled; either side's
// end closes both.
func (p *stallProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.stalled && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
