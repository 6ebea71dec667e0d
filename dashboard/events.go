package dashboard

import (
	"fmt"
	"net/http"
	"time"
)

// sseWriteTimeout bounds one write to a refresh stream, whatever the
// server's own WriteTimeout.
const sseWriteTimeout = 10 * time.Second

// events is the live refresh stream: a server-sent "tick" every
// Config.RefreshInterval, on which the page's script fetches the page
// again. At most Config.MaxSSEClients streams are open at once; beyond
// that it answers 503 and the script falls back to polling. A stream ends
// after sseLifetime (the browser reconnects), when the client goes, or on
// [Handler.Close].
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	select {
	case <-h.done:
		http.Error(w, "dashboard: closing", http.StatusServiceUnavailable)
		return
	default:
	}
	select {
	case h.sse <- struct{}{}:
		defer func() { <-h.sse }()
	default:
		w.Header().Set("Retry-After", "30")
		http.Error(w, "dashboard: too many live pages open; this one refreshes by polling", http.StatusServiceUnavailable)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
		if _, err := fmt.Fprint(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(fmt.Sprintf("retry: %d\n\n", (5 * time.Second).Milliseconds())) {
		return
	}
	tick := time.NewTicker(h.cfg.RefreshInterval)
	defer tick.Stop()
	end := time.NewTimer(sseLifetime)
	defer end.Stop()
	for n := 1; ; n++ {
		select {
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		case <-end.C:
			return
		case <-tick.C:
			if !write(fmt.Sprintf("event: tick\ndata: %d\n\n", n)) {
				return
			}
		}
	}
}
