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

// PendingChatsConsistent reports whether the per-chat count of pending
// updates matches the queue.
func (s *Server) PendingChatsConsistent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[int64]int{}
	for _, u := range s.st.pending {
		want[u.ChatID]++
	}
	if len(want) != len(s.st.pendingChats) {
		return false
	}
	for k, v := range want {
		if s.st.pendingChats[k] != v {
			return false
		}
	}
	return true
}
