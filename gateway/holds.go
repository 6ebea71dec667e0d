package gateway

import "sync"

// holds gives each key at most one holder at a time, and tells whoever
// finds a key held when it is given back. The gateway's three one-at-a-time
// rules use it: a journal entry's call in flight (flight.go), its outcome
// write after the answer (outcomes.go), and a query's answer (query.go).
// The zero value is ready to use; safe for concurrent use. It holds one
// entry per key held, so its users' bounds on what they hold bound it.
type holds[K comparable] struct {
	mu   sync.Mutex
	held map[K]chan struct{} // closed when the key is given back
}

// take takes k for the caller and returns the function that gives it back
// (call it exactly once); or, when k is held, nil and a channel closed when
// its holder gives it back.
func (h *holds[K]) take(k K) (release func(), busy <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.held[k]; ok {
		return nil, ch
	}
	if h.held == nil {
		h.held = make(map[K]chan struct{})
	}
	ch := make(chan struct{})
	h.held[k] = ch
	return func() {
		h.mu.Lock()
		delete(h.held, k)
		h.mu.Unlock()
		close(ch)
	}, nil
}

// busy returns a channel closed when k's holder gives it back, or nil when
// k is not held.
func (h *holds[K]) busy(k K) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[k]
}

// len returns how many keys are held.
func (h *holds[K]) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// all returns a channel per key held, each closed when its key is given
// back.
func (h *holds[K]) all() []<-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	chs := make([]<-chan struct{}, 0, len(h.held))
	for _, ch := range h.held {
		chs = append(chs, ch)
	}
	return chs
}
