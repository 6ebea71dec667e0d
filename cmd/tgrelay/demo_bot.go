package main

import (
	"bytes"
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
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/wire"
)

// Markers in a simulated user's text that make the demo bot misbehave.
const (
	// demoFlaky makes the bot answer 500 to the first demoFlakyFailures
	// attempts of that update, after it sent its reply (as a bot whose
	// database write fails after it answered the user would).
	demoFlaky = "#flaky"
	// demoFlakyFailures is how many attempts of a flaky update fail.
	demoFlakyFailures = 2
	// demoPoison makes the bot refuse that update for good (400).
	demoPoison = "#poison"
	// demoBurst makes the bot answer with demoBurstReplies messages in a
	// row to that chat.
	demoBurst = "#burst"
	// demoBurstReplies is how many replies a burst sends: more than the
	// five in five seconds Telegram lets one chat receive.
	demoBurstReplies = 7
	// demoEchoPrefix starts every echo of the bot.
	demoEchoPrefix = "echo: "
	// demoLatePrefix starts the late reply a stale attempt tries to send.
	demoLatePrefix = "late: "
	// demoMaxBody bounds a request body the bot reads, and an answer of
	// the gateway.
	demoMaxBody = 1 << 20
	// demoSendTimeout bounds one call to the gateway. It is above the
	// longest wait for a chat's turn the demo causes (see
	// demoForwardTimeout).
	demoSendTimeout = 10 * time.Second
	// demoShowWait is the wait at the gateway from which the live view
	// mentions it.
	demoShowWait = 300 * time.Millisecond
)

// demoBurstText is the text of reply k (from 1) of a burst answering text.
func demoBurstText(k int, text string) string {
	return fmt.Sprintf("burst %d/%d: %s", k, demoBurstReplies, text)
}

// demoBot is the demo's example bot: an HTTP endpoint, as a bot in any
// language would expose it to `tgrelay serve --forward`, that echoes every
// text back to its chat through the relay's Bot API gateway. For each
// update it uses the per-attempt API root the forward announces in
// Tgrelay-Api-Root as its Bot API root: the one setting an app changes. It
// keeps no memory of what it already sent: on a retried update it simply
// sends the same reply again, and the gateway answers that identical call
// from its journal instead of sending a second message.
//
// Updates are handled concurrently (the relay keeps one chat's updates in
// order), since a reply may wait at the gateway for its chat's turn.
type demoBot struct {
	client *http.Client // tgrelay's transport
	token  string
	view   *demoView
	delay  time.Duration // simulated work per update

	mu          sync.Mutex
	updates     map[int64]*demoBotUpdate
	exhaustions []forward.ExhaustionPayload
	late        *demoCall // the stale attempt's late reply, once sent
}

// demoBotUpdate is what the bot saw and did for one update.
type demoBotUpdate struct {
	attempts []int          // attempts seen, in order
	roots    map[int]string // attempt → its API root
	calls    []demoCall     // every call to the gateway, in order
	status   int            // what the bot answered the last forward
}

// demoCall is one call the bot made to the gateway and its answer.
type demoCall struct {
	attempt   int
	text      string
	status    int    // 0 when no answer came (the relay died mid-call)
	outcome   string // Tgrelay-Outcome, "answered" for Telegram's own answer
	replayed  bool   // Tgrelay-Replayed: answered from the journal
	messageID int64
	took      time.Duration
	err       string // why no answer came
}

// sent reports whether the call got Telegram's success, sent now or
// replayed from the journal.
func (c demoCall) sent() bool { return c.status == http.StatusOK }

// unknown reports whether the gateway answered the call unknown.
func (c demoCall) unknown() bool { return c.outcome == string(wire.OutcomeUnknown) }

func newDemoBot(client *http.Client, token string, view *demoView, delay time.Duration) *demoBot {
	return &demoBot{client: client, token: token, view: view, delay: delay, updates: make(map[int64]*demoBotUpdate)}
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

// record notes an attempt of an update and returns its record.
func (b *demoBot) record(id int64, attempt int, root string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.updates[id]
	if u == nil {
		u = &demoBotUpdate{roots: map[int]string{}}
		b.updates[id] = u
	}
	u.attempts = append(u.attempts, attempt)
	u.roots[attempt] = root
}

// answer notes what the bot answered an update's forward, and answers it.
func (b *demoBot) answer(w http.ResponseWriter, id int64, status int, msg string) {
	b.mu.Lock()
	if u := b.updates[id]; u != nil {
		u.status = status
	}
	b.mu.Unlock()
	if status == http.StatusOK {
		w.WriteHeader(status)
		return
	}
	http.Error(w, msg, status)
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
	attempt, _ := strconv.Atoi(r.Header.Get(wire.HeaderAttempt))
	claim := r.Header.Get(wire.HeaderClaimID)
	root := r.Header.Get(wire.HeaderAPIRoot)
	b.record(u.UpdateID, attempt, root)
	tag := fmt.Sprintf("update %d attempt %d (claim %s)", u.UpdateID, attempt, shortClaim(claim))
	if root == "" {
		b.view.printf("bot    %s: no %s header: is the relay's gateway off? → 500", tag, wire.HeaderAPIRoot)
		b.answer(w, u.UpdateID, http.StatusInternalServerError, "no API root")
		return
	}
	text, chat, name := u.Message.Text, u.Message.Chat.ID, u.Message.From.FirstName
	if strings.Contains(text, demoPoison) {
		b.view.printf("bot    %s: %q is poison → 400, refused for good", tag, text)
		b.answer(w, u.UpdateID, http.StatusBadRequest, "poison")
		return
	}
	time.Sleep(b.delay) // the bot's own work
	// A reply is sent even if the relay hangs up meanwhile: the gateway
	// decides, by the attempt's lease, whether it may still go.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), demoSendTimeout)
	defer cancel()

	if strings.Contains(text, demoBurst) {
		b.serveBurst(ctx, w, u.UpdateID, attempt, root, chat, name, text, tag)
		return
	}
	c := b.send(ctx, u.UpdateID, attempt, root, chat, demoEchoPrefix+text)
	var did string
	switch {
	case c.sent() && c.replayed:
		did = fmt.Sprintf("the same reply again → answered from the journal (message %d, Tgrelay-Replayed), not sent twice", c.messageID)
	case c.sent():
		did = fmt.Sprintf("replied %q to %s (message %d%s)", demoEchoPrefix+text, name, c.messageID, waited(c))
	case c.unknown() && c.replayed:
		// An earlier attempt's identical call has no recorded outcome: it
		// may have arrived, so it is never sent again. Nothing more to do.
		did = "the same reply again → answered unknown from the journal (an earlier attempt's call was under way when the relay died), never resent"
	case c.unknown():
		did = fmt.Sprintf("reply outcome unknown (%d); the gateway never resends it", c.status)
	case c.status == 0:
		b.view.printf("bot    %s: the gateway went away mid-call (%s): the relay died; the update will be retried", tag, c.err)
		b.answer(w, u.UpdateID, http.StatusInternalServerError, "gateway gone")
		return
	default:
		b.view.printf("bot    %s: reply answered %d (%s) → 500, relay will retry", tag, c.status, c.outcome)
		b.answer(w, u.UpdateID, http.StatusInternalServerError, "reply failed")
		return
	}
	if strings.Contains(text, demoFlaky) && b.attemptCount(u.UpdateID) <= demoFlakyFailures {
		b.view.printf("bot    %s: %s; then a simulated failure → 500, relay will retry", tag, did)
		b.answer(w, u.UpdateID, http.StatusInternalServerError, "simulated failure")
		return
	}
	b.view.printf("bot    %s: %s → 200", tag, did)
	b.answer(w, u.UpdateID, http.StatusOK, "")
}

// serveBurst answers a burst request with demoBurstReplies messages in a
// row to the chat, each waiting at the gateway for the chat's turn.
func (b *demoBot) serveBurst(ctx context.Context, w http.ResponseWriter, id int64, attempt int, root string, chat int64, name, text, tag string) {
	start := time.Now()
	ok := 0
	for k := 1; k <= demoBurstReplies; k++ {
		if c := b.send(ctx, id, attempt, root, chat, demoBurstText(k, text)); c.sent() {
			ok++
		}
	}
	if ok < demoBurstReplies {
		b.view.printf("bot    %s: %d of %d burst replies answered 200 → 500, relay will retry", tag, ok, demoBurstReplies)
		b.answer(w, id, http.StatusInternalServerError, "burst failed")
		return
	}
	b.view.printf("bot    %s: %d replies in a row to %s in %.1fs, each answered 200 (the gateway kept the chat's limit)", tag, ok, name, time.Since(start).Seconds())
	b.answer(w, id, http.StatusOK, "")
}

// waited describes how long a call waited, when it is worth saying.
func waited(c demoCall) string {
	if c.took < demoShowWait || c.replayed {
		return ""
	}
	return fmt.Sprintf(", after %.1fs at the gateway for the chat's turn", c.took.Seconds())
}

func (b *demoBot) attemptCount(id int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u := b.updates[id]; u != nil {
		return len(u.attempts)
	}
	return 0
}

// call sends one sendMessage under root and returns the gateway's answer.
func (b *demoBot) call(ctx context.Context, root string, chat int64, text string) demoCall {
	c := demoCall{text: text}
	params, _ := json.Marshal(map[string]any{"chat_id": chat, "text": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, root+"/bot"+b.token+"/sendMessage", bytes.NewReader(params))
	if err != nil {
		c.err = "bad API root"
		return c
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := b.client.Do(req)
	c.took = time.Since(start)
	if err != nil {
		c.err = "no answer"
		if botapi.Classify(err).Reason == botapi.ReasonNotDispatched {
			c.err = "not dispatched"
		}
		return c
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, demoMaxBody))
	if err != nil {
		c.err = "the answer broke off"
		return c
	}
	c.status = resp.StatusCode
	c.outcome = string(wire.OutcomeOf(resp.Header))
	c.replayed = resp.Header.Get(gateway.HeaderReplayed) == "true"
	var env struct {
		Result struct {
			MessageID int64 `json:"message_id"`
		} `json:"result"`
	}
	_ = json.Unmarshal(data, &env)
	c.messageID = env.Result.MessageID
	return c
}

// send makes one call on behalf of an update's attempt and records it.
func (b *demoBot) send(ctx context.Context, id int64, attempt int, root string, chat int64, text string) demoCall {
	c := b.call(ctx, root, chat, text)
	c.attempt = attempt
	b.mu.Lock()
	defer b.mu.Unlock()
	if u := b.updates[id]; u != nil {
		u.calls = append(u.calls, c)
	}
	return c
}

// sendLate sends a late reply to chat under an old attempt's API root, as
// a handler that kept running after its attempt was retried would.
func (b *demoBot) sendLate(ctx context.Context, id int64, attempt int, chat int64, text string) (demoCall, error) {
	b.mu.Lock()
	u := b.updates[id]
	var root string
	if u != nil {
		root = u.roots[attempt]
	}
	b.mu.Unlock()
	if root == "" {
		return demoCall{}, fmt.Errorf("the bot never saw attempt %d of update %d", attempt, id)
	}
	ctx, cancel := context.WithTimeout(ctx, demoSendTimeout)
	defer cancel()
	c := b.call(ctx, root, chat, text)
	c.attempt = attempt
	b.mu.Lock()
	b.late = &c
	b.mu.Unlock()
	return c, nil
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

// demoBotState is what the bot knows, copied.
type demoBotState struct {
	updates     map[int64]demoBotUpdate
	exhaustions []forward.ExhaustionPayload
	late        *demoCall
}

func (b *demoBot) state() demoBotState {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := demoBotState{
		updates:     make(map[int64]demoBotUpdate, len(b.updates)),
		exhaustions: append([]forward.ExhaustionPayload(nil), b.exhaustions...),
	}
	for id, u := range b.updates {
		s.updates[id] = demoBotUpdate{
			attempts: append([]int(nil), u.attempts...),
			calls:    append([]demoCall(nil), u.calls...),
			status:   u.status,
		}
	}
	if b.late != nil {
		late := *b.late
		s.late = &late
	}
	return s
}

// lastCall is the update's last call to the gateway, if any.
func (u demoBotUpdate) lastCall() (demoCall, bool) {
	if len(u.calls) == 0 {
		return demoCall{}, false
	}
	return u.calls[len(u.calls)-1], true
}

// answered reports how many of ids the bot last answered 200.
func (b *demoBot) answered(ids []int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, id := range ids {
		if u := b.updates[id]; u != nil && u.status == http.StatusOK {
			n++
		}
	}
	return n
}

// calls reports how many of update id's calls to the gateway have
// returned.
func (b *demoBot) calls(id int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u := b.updates[id]; u != nil {
		return len(u.calls)
	}
	return 0
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
