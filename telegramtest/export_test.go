package telegramtest

import "time"

// SetCloseWarnAfter shortens Close's 5 s warning delay.
func (s *Server) SetCloseWarnAfter(d time.Duration) { s.closeWarnAfter = d }

// SetCallHook runs hook at the start of every Bot API call (before Start).
func (s *Server) SetCallHook(hook func(method string)) { s.hookCall = hook }

// Inflight is how many Bot API calls are being served.
func (s *Server) Inflight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Polling is how many getUpdates calls are waiting for updates.
func (s *Server) Polling() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.polling
}
