package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/forward"
)

// Markers in a simulated user's text that make the demo bot misbehave.
const (
	// demoFlaky makes the bot answer 500 to the first demoFlakyFailures
	// attempts of that update.
	demoFlaky = "#flaky"
	// demoFlakyFailures is how many attempts of a flaky update fail.
	demoFlakyFailures = 2
	// demoPoison makes the bot refuse that update for good (400).
	demoPoison = "#poison"
	// demoEchoPrefix starts every reply of the bot.
	demoEchoPrefix = "echo: "
	// demoMaxBody bounds a request body the bot reads.
	demoMaxBody = 1 << 20
	// demoSendTimeout bounds one reply to Telegram.
	demoSendTimeout = 10 * time.Second
)

// demoBot is the demo's example bot: an HTTP endpoint, as a bot in any
// language would expose it to `tgrelay serve --forward`, that echoes every
// text back to its chat through tgrelay's transport. It remembers which
// updates it already answered, so a re-delivery (at least once) never sends a
// second reply: that memory is the bot's own "database". A real bot would
// keep it in its database and fence the write with the claim identity.
//
// Handling is serialised by one mutex: the demo is about outcomes, not speed.
type demoBot struct {
	api   *botapi.Client
	view  *demoView
	delay time.Duration // simulated work per reply

	mu          sync.Mutex
	replied     map[int64]int64  // update id → the reply's message id
	uncertain   map[int64]string // update id → why the reply's outcome is unknown
	attempts    map[int64][]int  // update id → attempts seen, in order
	refused     map[int64]int    // update id → status the bot answered last, when not 2xx
	again       int              // re-deliveries of an update already answered
	exhaustions []forward.ExhaustionPayload
	hook        func(updateID int64) // called after each reply, under mu
}

// setHook makes the bot call f after each reply it sends (under its mutex:
// f must not call back into the bot).
func (b *demoBot) setHook(f func(updateID int64)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = f
}

func newDemoBot(api *botapi.Client, view *demoView, delay time.Duration) *demoBot {
	return &demoBot{
		api:       api,
		view:      view,
		delay:     delay,
		replied:   make(map[int64]int64),
		uncertain: make(map[int64]string),
		attempts:  make(map[int64][]int),
		refused:   make(map[int64]int),
	}
}

// handler serves /update (the forward endpoint) and /exhaustion.
func (b *demoBot) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /update", b.serveUpdate)
	mux.HandleFunc("POST /exhaustion", b.serveExhaustion)
	return mux
}

// demoUpdate is the part of a Telegram update the bot reads.
type demoUpdate struct {
	UpdateID int64 `json:"update_id"`
	Message  *struct {
		Text string `json:"text"`
		Chat struct {
			ID int64 `json:"id"`
		} `json:"chat"`
		From struct {
			FirstName string `json:"first_name"`
		} `json:"from"`
	} `json:"message"`
}

func (b *demoBot) serveUpdate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, demoMaxBody))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var u demoUpdate
	if err := json.Unmarshal(body, &u); err != nil || u.Message == nil {
		http.Error(w, "not a message update", http.StatusBadRequest)
		return
	}
	attempt, _ := strconv.Atoi(r.Header.Get(forward.HeaderAttempt))
	claim := r.Header.Get(forward.HeaderClaimID)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts[u.UpdateID] = append(b.attempts[u.UpdateID], attempt)
	tag := fmt.Sprintf("update %d attempt %d (claim %s)", u.UpdateID, attempt, shortClaim(claim))
	if id, ok := b.replied[u.UpdateID]; ok {
		b.again++
		b.view.printf("bot    %s: already answered (message %d), no second reply → 200", tag, id)
		w.WriteHeader(http.StatusOK)
		return
	}
	if _, ok := b.uncertain[u.UpdateID]; ok {
		b.view.printf("bot    %s: reply outcome unknown, not repeated → 200", tag)
		w.WriteHeader(http.StatusOK)
		return
	}
	text := u.Message.Text
	switch {
	case strings.Contains(text, demoPoison):
		b.refused[u.UpdateID] = http.StatusBadRequest
		b.view.printf("bot    %s: %q is poison → 400, refused for good", tag, text)
		http.Error(w, "poison", http.StatusBadRequest)
		return
	case strings.Contains(text, demoFlaky) && len(b.attempts[u.UpdateID]) <= demoFlakyFailures:
		b.refused[u.UpdateID] = http.StatusInternalServerError
		b.view.printf("bot    %s: simulated outage → 500, relay will retry", tag)
		http.Error(w, "simulated outage", http.StatusInternalServerError)
		return
	}
	time.Sleep(b.delay) // the bot's own work; the mutex is held on purpose
	// The reply is sent even if the relay hangs up meanwhile: once the bot
	// decided to answer, it finishes and remembers, or the re-delivery after a
	// relay crash would send a second reply.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), demoSendTimeout)
	defer cancel()
	res, err := b.api.Call(ctx, "sendMessage", map[string]any{
		"chat_id": u.Message.Chat.ID,
		"text":    demoEchoPrefix + text,
	})
	if err != nil {
		if botapi.Classify(err).Reason == botapi.ReasonNotDispatched {
			// Nothing left: a retry cannot duplicate the reply.
			b.view.printf("bot    %s: reply not dispatched → 500, relay will retry", tag)
			http.Error(w, "reply not dispatched", http.StatusInternalServerError)
			return
		}
		b.uncertain[u.UpdateID] = b.api.Redact(err.Error())
		b.view.printf("bot    %s: reply outcome unknown (%s); not repeated → 200", tag, botapi.Classify(err).Reason)
		w.WriteHeader(http.StatusOK)
		return
	}
	var m struct {
		MessageID int64 `json:"message_id"`
	}
	_ = json.Unmarshal(res, &m)
	b.replied[u.UpdateID] = m.MessageID
	delete(b.refused, u.UpdateID)
	b.view.printf("bot    %s: replied %q to %s (message %d) → 200", tag, demoEchoPrefix+text, u.Message.From.FirstName, m.MessageID)
	if b.hook != nil {
		b.hook(u.UpdateID)
	}
	w.WriteHeader(http.StatusOK)
}

func (b *demoBot) serveExhaustion(w http.ResponseWriter, r *http.Request) {
	p, err := forward.DecodeExhaustion(io.LimitReader(r.Body, demoMaxBody))
	if err != nil {
		http.Error(w, "not an exhaustion", http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.exhaustions = append(b.exhaustions, p)
	b.mu.Unlock()
	b.view.printf("bot    exhaustion of update %d (attempt %d, claim %s): %s → 200, acknowledged",
		p.UpdateID, p.Attempt, shortClaim(p.ClaimID), oneLine(p.Error, 60))
	w.Header().Set(forward.HeaderAck, p.ClaimID) // a 2xx alone does not acknowledge
	w.WriteHeader(http.StatusOK)
}

// snapshot is what the bot knows, copied.
type demoBotState struct {
	replied     map[int64]int64
	uncertain   map[int64]string
	attempts    map[int64][]int
	again       int
	exhaustions []forward.ExhaustionPayload
}

func (b *demoBot) state() demoBotState {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := demoBotState{
		replied:     make(map[int64]int64, len(b.replied)),
		uncertain:   make(map[int64]string, len(b.uncertain)),
		attempts:    make(map[int64][]int, len(b.attempts)),
		again:       b.again,
		exhaustions: append([]forward.ExhaustionPayload(nil), b.exhaustions...),
	}
	for k, v := range b.replied {
		s.replied[k] = v
	}
	for k, v := range b.uncertain {
		s.uncertain[k] = v
	}
	for k, v := range b.attempts {
		s.attempts[k] = append([]int(nil), v...)
	}
	return s
}

// answered reports how many of ids the bot replied to (or holds as
// uncertain).
func (b *demoBot) answered(ids []int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, id := range ids {
		_, r := b.replied[id]
		_, u := b.uncertain[id]
		if r || u {
			n++
		}
	}
	return n
}

func (b *demoBot) exhaustionCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.exhaustions)
}

// shortClaim abbreviates a claim id for the live view.
func shortClaim(c string) string {
	if c == "" {
		return "-"
	}
	if len(c) > 8 {
		return c[:8] + "…"
	}
	return c
}

// errDemoFailed is returned by the demo when a check of its report fails.
var errDemoFailed = errors.New("demo: a check of the report failed")
