package telegramtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Message is one message the server accepted from the bot: a send, copy,
// forward or edit. It is a plain value, a snapshot.
type Message struct {
	ChatID    int64 `json:"chat_id"`
	MessageID int64 `json:"message_id"`
	ThreadID  int64 `json:"thread_id,omitempty"`
	// Method is the Bot API method: sendMessage, sendPhoto, sendMediaGroup
	// (one entry per item), copyMessage, forwardMessage, editMessageText,
	// editMessageCaption, editMessageReplyMarkup, ….
	Method string `json:"method"`
	// Text is the text or caption as the bot sent it (markup included),
	// the dice emoji or the poll question.
	Text string `json:"text"`
	// PlainText is Text as a reader sees it: HTML or Markdown parsed into
	// Entities.
	PlainText string `json:"plain_text"`
	// Entities are PlainText's entities, as Telegram reports them.
	Entities []Entity `json:"entities,omitempty"`
	// ReplyTo is the message this one replies to, zero for none.
	ReplyTo int64 `json:"reply_to,omitempty"`
	// ReplyMarkup is the reply_markup as the bot sent it (a reply keyboard
	// included, which Telegram does not echo in the message).
	ReplyMarkup json.RawMessage `json:"reply_markup,omitempty"`
	// Time is from Config.NowFunc.
	Time time.Time `json:"time"`
}

// CallbackAnswer is one answerCallbackQuery the server accepted. It is a
// plain value, a snapshot.
type CallbackAnswer struct {
	QueryID   string    `json:"callback_query_id"`
	ChatID    int64     `json:"chat_id"`
	MessageID int64     `json:"message_id"`
	Text      string    `json:"text,omitempty"`
	ShowAlert bool      `json:"show_alert,omitempty"`
	URL       string    `json:"url,omitempty"`
	Time      time.Time `json:"time"`
}

// InlineAnswer is one answerInlineQuery the server accepted. It is a
// plain value, a snapshot.
type InlineAnswer struct {
	QueryID    string          `json:"inline_query_id"`
	UserID     int64           `json:"user_id"`
	Results    json.RawMessage `json:"results"`
	Count      int             `json:"count"`
	CacheTime  int             `json:"cache_time,omitempty"`
	IsPersonal bool            `json:"is_personal,omitempty"`
	NextOffset string          `json:"next_offset,omitempty"`
	Time       time.Time       `json:"time"`
}

// CallbackAnswers returns every accepted answerCallbackQuery, in order.
func (s *Server) CallbackAnswers() []CallbackAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.st.answers)
}

// InlineAnswers returns every accepted answerInlineQuery, in order.
func (s *Server) InlineAnswers() []InlineAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.st.inlineAnswers)
}

// Delivery is one offer of an update to the bot: a webhook attempt, or an
// update returned by getUpdates. It is a plain value, a snapshot.
type Delivery struct {
	UpdateID int64  `json:"update_id"`
	ChatID   int64  `json:"chat_id"`
	Via      string `json:"via"` // "webhook" or "getUpdates"
	// Attempt counts the offers of this update, from 1.
	Attempt int `json:"attempt"`
	// Status is the webhook's HTTP status, or 0 when none was received.
	Status int `json:"status"`
	// Err is Telegram's wording of a failed attempt ("Wrong response from
	// the webhook: 500 Internal Server Error", "Read timeout expired").
	Err string `json:"error,omitempty"`
	// Reached is true when the request reached the bot (its headers were
	// written), so the bot may have seen the update.
	Reached bool `json:"reached"`
	// GaveUp is true on the last attempt, after which the update is dropped.
	GaveUp bool `json:"gave_up,omitempty"`
	// Start is when the offer began, from Config.NowFunc.
	Start time.Time `json:"start"`
	// Duration is how long a webhook attempt took, in real time.
	Duration time.Duration `json:"duration"`
}

// TextCount is how many times one chat received one text.
type TextCount struct {
	ChatID int64  `json:"chat_id"`
	Text   string `json:"text"`
	Count  int    `json:"count"`
}

// Messages returns a copy of the ledger of accepted messages, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.st.ledger)
}

// MessagesTo returns the accepted messages of one chat, in order.
func (s *Server) MessagesTo(chatID int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.st.ledger {
		if m.ChatID == chatID {
			out = append(out, m)
		}
	}
	return out
}

// Deliveries returns a copy of the ledger of delivery attempts, in order
// of completion (at most Config.MaxDeliveries; see DroppedDeliveries).
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.st.deliveries)
}

// DroppedDeliveries is how many of the oldest delivery records were
// dropped to keep the ledger within Config.MaxDeliveries.
func (s *Server) DroppedDeliveries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.droppedDeliv
}

// TextCounts counts the new messages with a text or caption (sends,
// copies and forwards, not edits; media without a caption, locations and
// stickers are not counted) per (chat, text), sorted by chat then text.
func (s *Server) TextCounts() []TextCount {
	s.mu.Lock()
	type key struct {
		chat int64
		text string
	}
	counts := map[key]int{}
	for _, m := range s.st.ledger {
		if !strings.HasPrefix(m.Method, "edit") && m.Text != "" {
			counts[key{m.ChatID, m.Text}]++
		}
	}
	s.mu.Unlock()
	out := make([]TextCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, TextCount{ChatID: k.chat, Text: k.text, Count: n})
	}
	slices.SortFunc(out, func(a, b TextCount) int {
		if a.ChatID != b.ChatID {
			if a.ChatID < b.ChatID {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Text, b.Text)
	})
	return out
}

// Repeats returns the (chat, text) pairs received more than once: empty
// when no chat received the same text twice.
func (s *Server) Repeats() []TextCount {
	var out []TextCount
	for _, tc := range s.TextCounts() {
		if tc.Count > 1 {
			out = append(out, tc)
		}
	}
	return out
}

// DuplicateDeliveries returns, in ascending order, the update ids the bot
// may have seen more than once: offered more than once with the request
// reaching the bot each time (a re-delivery after a timeout or a non-2xx
// answer, or getUpdates returning an unconfirmed update again).
func (s *Server) DuplicateDeliveries() []int64 {
	s.mu.Lock()
	n := map[int64]int{}
	for _, d := range s.st.deliveries {
		if d.Reached {
			n[d.UpdateID]++
		}
	}
	s.mu.Unlock()
	var out []int64
	for id, c := range n {
		if c > 1 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Calls returns how many times each Bot API method was called (with a
// valid token), by the name the caller used.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.st.calls))
	for k, v := range s.st.calls {
		out[k] = v
	}
	return out
}

// Reset forgets every user, chat, update, message, delivery, fault and
// the webhook, and restores Config.Limits; the token and URL stay.
// Deliveries in flight finish unrecorded.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	epoch, polling := s.st.epoch+1, s.st.polling
	s.st = newState(s.cfg.Limits)
	s.st.epoch, s.st.polling = epoch, polling // waiting polls end and count themselves out
	s.wakeLocked()
}

// pokeLocked wakes the waits on the ledger and on activity
// ([Server.WaitMessages], [Server.WaitSettled]).
func (s *Server) pokeLocked() {
	close(s.events)
	s.events = make(chan struct{})
}

// WaitMessages waits until the ledger holds at least n messages of chat
// chatID (sends and edits, as [Server.MessagesTo] lists them) and returns
// them. It wakes on every ledger change, never polls, and returns ctx's
// error (with what arrived so far) when ctx ends first, and an error when
// the server is closed.
func (s *Server) WaitMessages(ctx context.Context, chatID int64, n int) ([]Message, error) {
	for {
		s.mu.Lock()
		var out []Message
		for _, m := range s.st.ledger {
			if m.ChatID == chatID {
				out = append(out, m)
			}
		}
		ch := s.events
		s.mu.Unlock()
		if len(out) >= n {
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return out, fmt.Errorf("telegramtest: waiting for %d message(s) in chat %d, %d arrived: %w", n, chatID, len(out), ctx.Err())
		case <-s.ctx.Done():
			return out, errClosed
		}
	}
}

// WaitSettled waits until the conversation has settled: no update waits
// for the bot (webhook re-deliveries after a failure included), no Bot
// API call other than a long poll is being served, and every 429 the
// server answered has passed its retry_after, so a bot that retries after
// a 429 has had its chance to. It returns ctx's error when ctx ends first
// and an error when the server is closed.
func (s *Server) WaitSettled(ctx context.Context) error {
	for {
		s.mu.Lock()
		pending, busy := len(s.st.pending), 0
		for _, r := range s.reqs {
			if !strings.EqualFold(r.method, "getUpdates") {
				busy++
			}
		}
		retry := time.Until(s.st.retryUntil)
		ch, upd := s.events, s.changed
		s.mu.Unlock()
		if pending == 0 && busy == 0 && retry <= 0 {
			return nil
		}
		var timer <-chan time.Time
		if retry > 0 {
			t := time.NewTimer(retry)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ch:
		case <-upd:
		case <-timer:
		case <-ctx.Done():
			return fmt.Errorf("telegramtest: waiting to settle (%d pending update(s), %d call(s) in flight, retry window %v): %w",
				pending, busy, max(retry, 0).Round(time.Millisecond), ctx.Err())
		case <-s.ctx.Done():
			return errClosed
		}
	}
}
