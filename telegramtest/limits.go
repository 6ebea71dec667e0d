package telegramtest

import (
	"fmt"
	"time"
)

// window remembers the times of the last sends under one limit (at most
// Count of them, so it is bounded by the limit itself).
type window struct{ times []time.Time }

// wait is how long until one more send fits in the window; 0 means now.
func (w *window) wait(now time.Time, l Limit) time.Duration {
	if l.Count < 0 || len(w.times) < l.Count {
		return 0
	}
	oldest := w.times[len(w.times)-l.Count]
	if d := l.Per - now.Sub(oldest); d > 0 {
		return d
	}
	return 0
}

func (w *window) add(now time.Time, l Limit) {
	if l.Count < 0 {
		return
	}
	w.times = append(w.times, now)
	if n := len(w.times) - l.Count; n > 0 {
		w.times = append(w.times[:0], w.times[n:]...)
	}
}

type rateState struct {
	bot    window
	chats  map[int64]*window
	groups map[int64]*window
}

func newRateState() rateState {
	return rateState{chats: map[int64]*window{}, groups: map[int64]*window{}}
}

// rateCheckLocked counts one send to c against every limit that applies,
// or refuses it with 429 and retry_after (whole seconds, at least 1) when
// one of them is exhausted; a refused send counts against none.
func (s *Server) rateCheckLocked(c *chatState) *apiError {
	l := s.st.limits
	if l.Disabled {
		return nil
	}
	now := s.now()
	chat := s.st.rate.chats[c.ID]
	if chat == nil {
		chat = &window{}
		s.st.rate.chats[c.ID] = chat
	}
	var group *window
	if c.Type != ChatPrivate {
		group = s.st.rate.groups[c.ID]
		if group == nil {
			group = &window{}
			s.st.rate.groups[c.ID] = group
		}
	}
	wait := max(s.st.rate.bot.wait(now, l.Bot), chat.wait(now, l.Chat))
	if group != nil {
		wait = max(wait, group.wait(now, l.Group))
	}
	if wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		return &apiError{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", secs), retryAfter: secs}
	}
	s.st.rate.bot.add(now, l.Bot)
	chat.add(now, l.Chat)
	if group != nil {
		group.add(now, l.Group)
	}
	return nil
}

// SetLimits replaces the rate limits while the server runs; windows
// already counted are kept. Zero fields mean the defaults, as in
// [Config.Limits].
func (s *Server) SetLimits(l Limits) error {
	if err := l.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.limits = l.withDefaults()
	return nil
}
