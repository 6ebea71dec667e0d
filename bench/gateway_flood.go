package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// Defaults and bounds of the gateway-flood scenario.
const (
	floodDefaultMessages = 3000
	floodDefaultWorkers  = 32
	floodDefaultPrivates = 40
	floodDefaultGroups   = 10
	// floodDefaultGroupShare is the share of the messages that go to the
	// groups: 600 of 3,000, so every chat, private or group, gets 60. A
	// group takes 5 in any 5 s and 20 a minute: its 20 first go within
	// 15 s at best, the 21st to 40th at 60–75 s, the 41st to 60th at
	// 120–135 s, so the groups bind the run (135 s; the bot's 30 a second
	// binds 3,000 messages at 99 s), and a group's 21st and 41st message
	// wait for their turn.
	floodDefaultGroupShare = 0.2
	// floodDefaultClientTimeout is the app's HTTP client timeout: aiogram's
	// and go-telegram/bot's default of a minute.
	floodDefaultClientTimeout = time.Minute
	// floodDefaultQuietEvery is the quiet chat's silence between messages.
	floodDefaultQuietEvery = 2 * time.Second
	// floodDefaultTimeout bounds the flood itself; the run stops there.
	floodDefaultTimeout = 10 * time.Minute
	// floodMax429Tries is how many 429s in a row the app waits out for one
	// message before it gives up on it, as a library's retry plugin does.
	floodMax429Tries = 5
	// floodLateArrival bounds how long after a call without an answer
	// started its message may still reach the chat: the limiter's default
	// MaxWait (a minute) plus the send. The run waits for it before it
	// reads the ledger.
	floodLateArrival = 75 * time.Second
	// floodGoalWallRatio is issue 20's bound on wall time ÷ the
	// limit-bound minimum; floodGoalQuietP99 its bound on the quiet chat.
	floodGoalWallRatio = 1.15
	floodGoalQuietP99  = 1100 * time.Millisecond
)

// floodLimits are Telegram's published limits as telegramtest keeps them
// by default: about 30 messages a second per bot, one a second per chat
// with short bursts (5 in any 5 s), 20 a minute per group.
var floodLimits = telegramtest.Limits{
	Bot:   telegramtest.Limit{Count: telegramtest.DefaultBotLimitCount, Per: telegramtest.DefaultBotLimitPer},
	Chat:  telegramtest.Limit{Count: telegramtest.DefaultChatLimitCount, Per: telegramtest.DefaultChatLimitPer},
	Group: telegramtest.Limit{Count: telegramtest.DefaultGroupLimitCount, Per: telegramtest.DefaultGroupLimitPer},
}

// runGatewayFlood floods `tgrelay serve`'s gateway (the built binary,
// with its default limiter) in front of telegramtest at Telegram's real
// limits, unscaled, and checks issue 20's goals: no 429 reaches the app,
// every message that reached its chat was answered to its sender, each
// chat's messages arrive in the order they were sent, the flood ends
// within 1.15× the time the limits allow at best, and a quiet chat on the
// side is answered within 1.1 s (p99).
//
// The app is what a bot team writes with a stock HTTP client: each chat
// has its queue of messages, sent one at a time and in order, and 32
// workers take turns over the chats that have a message ready (a worker
// takes a chat, sends its next message, and puts the chat back at the end
// of the line), so a chat waiting for its turn holds one worker, not the
// others. Each call has the client's timeout (-client-timeout); a 429 is waited
// out (retry_after) and the message sent again, up to 5 times; a
// connection error, a timeout or an unknown answer is counted and the
// message is never sent again (it may have arrived). The quiet chat sends
// one message every -quiet-every while the flood runs.
//
// Afterwards the sandbox's ledger is the truth: every message is matched
// to its call. A call without an answer whose message is in the chat is
// the failure issue 20 names (an app that resends it duplicates it). The
// run waits up to 75 s (the limiter's default wait and the send) after
// such a call for its message to arrive before reading the ledger.
func runGatewayFlood(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gateway-flood", flag.ContinueOnError)
	fs.SetOutput(out)
	var p floodPlan
	fs.IntVar(&p.messages, "messages", floodDefaultMessages, "messages the workers send")
	fs.IntVar(&p.privates, "privates", floodDefaultPrivates, "private chats")
	fs.IntVar(&p.groups, "groups", floodDefaultGroups, "groups")
	fs.Float64Var(&p.groupShare, "group-share", floodDefaultGroupShare, "share of the messages sent to the groups (evenly); the rest go evenly to the private chats")
	workers := fs.Int("workers", floodDefaultWorkers, "app workers")
	clientTimeout := fs.Duration("client-timeout", floodDefaultClientTimeout, "the app's HTTP client timeout per call")
	quietEvery := fs.Duration("quiet-every", floodDefaultQuietEvery, "the quiet chat's silence between two messages")
	timeout := fs.Duration("timeout", floodDefaultTimeout, "bound of the flood; the run stops and reports there")
	lateArrival := fs.Duration("late-arrival", floodLateArrival, "how long after a call without an answer started to wait for its message to reach the chat")
	bin := fs.String("bin", "", "tgrelay binary (default: go build github.com/tgrelay/tgrelay/cmd/tgrelay)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := p.validate(); err != nil {
		return err
	}
	if *workers < 1 || *clientTimeout <= 0 || *quietEvery <= 0 || *timeout <= 0 || *lateArrival < 0 {
		return errors.New("need -workers ≥ 1, -client-timeout, -quiet-every and -timeout > 0, -late-arrival ≥ 0")
	}
	dir, err := os.MkdirTemp("", "tgrelay-bench-flood-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin, err = buildTgrelay(ctx, dir, *bin, out); err != nil {
		return err
	}

	tg := telegramtest.NewServer(telegramtest.Config{Limits: floodLimits, Logf: func(string, ...any) {}})
	defer tg.Close()
	chats, err := p.chats(tg)
	if err != nil {
		return err
	}
	quiet, err := tg.NewPrivateChat(tg.NewUser("quiet"))
	if err != nil {
		return err
	}

	// serve needs an app to forward to; no update comes in this scenario.
	sink, err := startRelayServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), "/update")
	if err != nil {
		return err
	}
	defer sink.close()
	gwAddr, err := relayFreeAddr()
	if err != nil {
		return err
	}
	serve, err := startServe(ctx, "serve", *bin, dir,
		[]string{"--db", filepath.Join(dir, "relay.db"), "--api-root", tg.URL, "--forward", sink.url,
			"--gateway-listen", gwAddr, "--webhook-check-interval", "0", "--log-level", "warn"}, tg)
	if err != nil {
		return err
	}
	defer serve.stop()

	jobs := allJobs(chats)
	fmt.Fprintf(out, "gateway-flood: tgrelay serve (the built binary, its gateway with default limits) in front of telegramtest at Telegram's limits, not scaled:\n")
	fmt.Fprintf(out, "  bot %d per %v, chat %d per %v, group %d per %v (sliding windows; a 429 with retry_after beyond them)\n",
		floodLimits.Bot.Count, floodLimits.Bot.Per, floodLimits.Chat.Count, floodLimits.Chat.Per, floodLimits.Group.Count, floodLimits.Group.Per)
	fmt.Fprintf(out, "  app: %d workers, %s; client timeout %v; a 429 is waited out and retried (≤ %d), a connection error or unknown is not resent\n",
		*workers, p.describe(), *clientTimeout, floodMax429Tries)
	fmt.Fprintf(out, "  quiet chat: one message every %v while the flood runs\n", *quietEvery)

	app := newFloodApp("http://"+gwAddr+"/bot"+tg.Token+"/sendMessage", *clientTimeout, *workers)
	defer app.client.CloseIdleConnections()
	res := runFlood(ctx, app, chats, *workers, quiet.ID, *quietEvery, *timeout)
	if err := ctx.Err(); err != nil {
		return err
	}
	// A call without an answer may still be waiting in the gateway: give
	// its message the time to arrive before the ledger is read.
	if late := res.lastUnanswered(); !late.IsZero() {
		deadline := late.Add(*lateArrival)
		fmt.Fprintf(out, "  waiting up to %v for the messages of calls without an answer to reach their chats\n", time.Until(deadline).Round(time.Second))
		waitLedger(ctx, tg, jobs, deadline)
	}
	gw, err := scrapeGatewayMetrics(ctx, serve.admin)
	if err != nil {
		fmt.Fprintf(out, "  serve's metrics: %v\n", err)
	}
	r := analyzeFlood(jobs, tg.Messages(), quiet.ID)
	r.flood = res
	r.min = p.minimum(jobs, floodLimits, res.quietSent)
	r.gw = gw
	return r.report(out, p, *workers)
}

// floodPlan is how the messages are spread over the chats.
type floodPlan struct {
	messages, privates, groups int
	groupShare                 float64
}

func (p floodPlan) validate() error {
	switch {
	case p.messages < 1 || p.privates < 0 || p.groups < 0 || p.privates+p.groups < 1:
		return errors.New("need -messages ≥ 1 and at least one chat")
	case p.groupShare < 0 || p.groupShare > 1 || (p.groups == 0 && p.groupShare > 0) || (p.privates == 0 && p.groupShare < 1):
		return errors.New("-group-share must be within 0..1, 0 without groups and 1 without private chats")
	}
	return nil
}

// groupMessages is how many messages go to the groups.
func (p floodPlan) groupMessages() int { return int(float64(p.messages)*p.groupShare + 0.5) }

// spread returns n split over k as evenly as possible: the first n%k get
// one more.
func spread(n, k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = n / k
		if i < n%k {
			out[i]++
		}
	}
	return out
}

func (p floodPlan) describe() string {
	g := p.groupMessages()
	pr := spread(p.messages-g, max(p.privates, 1))
	gr := spread(g, max(p.groups, 1))
	return fmt.Sprintf("%d messages: %d to %d private chats (%s each), %d to %d groups (%s each); each chat's one at a time, in order",
		p.messages, p.messages-g, p.privates, span(pr), g, p.groups, span(gr))
}

// span formats the range of counts: "30" or "67–68".
func span(ns []int) string {
	if len(ns) == 0 {
		return "0"
	}
	lo, hi := slices.Min(ns), slices.Max(ns)
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// floodChat is one chat of the flood and its queue of messages.
type floodChat struct {
	id    int64
	group bool
	jobs  []*floodJob // in the order the app sends them
	next  int         // the next to send; owned by the worker holding the chat
}

// chats creates the chats in tg and their messages: the first of each
// chat, then the second of each, and so on, numbered in that order.
func (p floodPlan) chats(tg *telegramtest.Server) ([]*floodChat, error) {
	g := p.groupMessages()
	var out []*floodChat
	for i, n := range spread(p.messages-g, p.privates) {
		c, err := tg.NewPrivateChat(tg.NewUser(fmt.Sprintf("u%d", i)))
		if err != nil {
			return nil, err
		}
		out = append(out, &floodChat{id: c.ID, jobs: make([]*floodJob, n)})
	}
	for i, n := range spread(g, p.groups) {
		c, err := tg.NewGroup(fmt.Sprintf("g%d", i), tg.NewUser(fmt.Sprintf("m%d", i)))
		if err != nil {
			return nil, err
		}
		out = append(out, &floodChat{id: c.ID, group: true, jobs: make([]*floodJob, n)})
	}
	layoutJobs(out)
	return out, nil
}

// floodJob is one message of the flood and what became of its call.
type floodJob struct {
	id    int // the text is "flood <id>"
	chat  int64
	group bool
	seq   int // position in its chat's queue

	// Set by the worker that sent it.
	call floodCall
	// Set from the ledger.
	arrivals int
}

// layoutJobs fills each chat's queue, numbering the messages the first
// of each chat, then the second of each, and so on.
func layoutJobs(chats []*floodChat) {
	id := 0
	for k := 0; ; k++ {
		more := false
		for _, c := range chats {
			if k >= len(c.jobs) {
				continue
			}
			more = true
			c.jobs[k] = &floodJob{id: id, chat: c.id, group: c.group, seq: k, call: floodCall{outcome: outcomeNotSent}}
			id++
		}
		if !more {
			return
		}
	}
}

// allJobs returns every job of chats by id.
func allJobs(chats []*floodChat) []*floodJob {
	var jobs []*floodJob
	for _, c := range chats {
		jobs = append(jobs, c.jobs...)
	}
	slices.SortFunc(jobs, func(a, b *floodJob) int { return a.id - b.id })
	return jobs
}

// windowMin is the earliest the last of n sends can go under limits of
// Count sends in any window of Per each, the first at 0. Sending each as
// early as every limit allows is the fastest schedule: the k-th (from 0)
// goes Per after the (k−Count)-th under each limit, so at the latest of
// those. A group's 60 messages at 5 per 5 s and 20 a minute: the 20th
// goes at 15 s, the 21st to 40th at 60–75 s, the 41st to 60th at
// 120–135 s.
func windowMin(n int, limits ...telegramtest.Limit) time.Duration {
	if n <= 0 {
		return 0
	}
	at := make([]time.Duration, n)
	for k := range at {
		for _, l := range limits {
			if l.Count > 0 && k >= l.Count {
				at[k] = max(at[k], at[k-l.Count]+l.Per)
			}
		}
	}
	return at[n-1]
}

// floodMin is the limit-bound minimum of a flood and which limit sets it.
type floodMin struct {
	bot, private, group time.Duration
}

func (m floodMin) value() time.Duration { return max(m.bot, m.private, m.group) }

func (m floodMin) binding() string {
	switch m.value() {
	case m.bot:
		return "the bot's limit"
	case m.group:
		return "the busiest group's limit"
	}
	return "the busiest private chat's limit"
}

// minimum is a lower bound of the time the limits allow a flood of these
// jobs, from its first send to its last: the largest of the bot-wide bound
// over every message (the quiet chat's included) and each chat's own bound
// under every limit that applies to it.
func (p floodPlan) minimum(jobs []*floodJob, l telegramtest.Limits, quiet int) floodMin {
	per := map[int64]int{}
	group := map[int64]bool{}
	for _, j := range jobs {
		per[j.chat]++
		group[j.chat] = j.group
	}
	m := floodMin{bot: windowMin(len(jobs)+quiet, l.Bot)}
	for c, n := range per {
		if group[c] {
			m.group = max(m.group, windowMin(n, l.Chat, l.Group))
		} else {
			m.private = max(m.private, windowMin(n, l.Chat))
		}
	}
	return m
}

// Outcomes of one message's call, as the app saw it.
const (
	outcomeOK       = "ok"
	outcomeTimeout  = "timeout"  // the client's timeout: no answer
	outcomeConn     = "conn"     // connection reset, EOF, cut answer: no answer
	outcome429      = "429"      // still 429 after floodMax429Tries
	outcomeUnknown  = "unknown"  // the gateway's 502 unknown
	outcomeNotSent  = "not-sent" // the run stopped before it was sent
	outcomeOtherErr = "error"    // any other non-OK answer
)

// floodCall is what the app saw of one message.
type floodCall struct {
	outcome    string
	status     int // the last answer's status (0 without one)
	limited    int // 429s waited out
	start, end time.Time
}

// answered reports whether the app got an answer for the message.
func (c floodCall) answered() bool {
	return c.outcome != outcomeTimeout && c.outcome != outcomeConn && c.outcome != outcomeNotSent
}

// floodApp sends sendMessage as a bot's app does with a stock client.
type floodApp struct {
	client *http.Client
	url    string
}

func newFloodApp(url string, timeout time.Duration, workers int) *floodApp {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers + 1
	return &floodApp{client: &http.Client{Transport: tr, Timeout: timeout}, url: url}
}

// send sends one message until it gets an answer that is not a 429 (up to
// floodMax429Tries 429s), or fails without one.
func (a *floodApp) send(ctx context.Context, chat int64, text string) floodCall {
	body, _ := json.Marshal(map[string]any{"chat_id": chat, "text": text})
	c := floodCall{start: time.Now()}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
		if err != nil {
			c.outcome = outcomeOtherErr
			c.end = time.Now()
			return c
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := a.client.Do(req)
		if err != nil && ctx.Err() != nil { // the run stopped: not the gateway's doing
			c.outcome = outcomeNotSent
			c.end = time.Now()
			return c
		}
		if err != nil {
			c.outcome = classifyCallErr(err)
			c.end = time.Now()
			return c
		}
		var env struct {
			OK         bool `json:"ok"`
			Parameters struct {
				RetryAfter int `json:"retry_after"`
			} `json:"parameters"`
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		c.status = resp.StatusCode
		if err != nil { // the answer was cut: the app has no outcome
			c.outcome = classifyCallErr(err)
			c.end = time.Now()
			return c
		}
		_ = json.Unmarshal(raw, &env)
		switch {
		case resp.StatusCode == http.StatusOK && env.OK:
			c.outcome = outcomeOK
		case resp.StatusCode == http.StatusTooManyRequests:
			c.limited++
			if c.limited >= floodMax429Tries {
				c.outcome = outcome429
				break
			}
			if backoff.Sleep(ctx, time.Duration(max(env.Parameters.RetryAfter, 1))*time.Second) != nil {
				c.outcome = outcomeNotSent
				break
			}
			continue
		case wire.OutcomeOf(resp.Header) == wire.OutcomeUnknown:
			c.outcome = outcomeUnknown
		default:
			c.outcome = outcomeOtherErr
		}
		c.end = time.Now()
		return c
	}
}

// classifyCallErr tells the client's own timeout from a connection that
// broke (reset, EOF).
func classifyCallErr(err error) string {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return outcomeTimeout
	}
	return outcomeConn
}

// floodRun is what the app measured while it flooded.
type floodRun struct {
	wall       time.Duration // from the first call to the last outcome
	quietWaits []time.Duration
	quietErrs  int
	quietSent  int // quiet messages sent (answered or not) during the flood
	jobs       []*floodJob
}

// lastUnanswered returns when the last call without an answer started,
// zero for none.
func (r floodRun) lastUnanswered() time.Time {
	var t time.Time
	for _, j := range r.jobs {
		if !j.call.answered() && j.call.outcome != outcomeNotSent && j.call.start.After(t) {
			t = j.call.start
		}
	}
	return t
}

// interleaveChats spreads the groups evenly among the private chats, for
// the first turn (40 and 10: 4 private chats, a group, 4 private chats, …).
func interleaveChats(chats []*floodChat) []*floodChat {
	var privates, groups []*floodChat
	for _, c := range chats {
		if c.group {
			groups = append(groups, c)
		} else {
			privates = append(privates, c)
		}
	}
	n, g := len(chats), len(groups)
	out := make([]*floodChat, 0, n)
	for i := range n {
		if (i+1)*g/n > i*g/n { // the i-th place is the next group's share
			out, groups = append(out, groups[0]), groups[1:]
		} else {
			out, privates = append(out, privates[0]), privates[1:]
		}
	}
	return out
}

// runFlood runs the workers over the chats and the quiet chat beside
// them, until every message has its outcome or timeout passes.
func runFlood(ctx context.Context, app *floodApp, chats []*floodChat, workers int, quietChat int64, quietEvery, timeout time.Duration) floodRun {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := floodRun{jobs: allJobs(chats)}

	// ready holds each chat with a message to send at most once, so it
	// never fills; the last chat to finish closes it.
	ready := make(chan *floodChat, len(chats))
	var left atomic.Int64
	for _, c := range interleaveChats(chats) {
		if len(c.jobs) > 0 {
			left.Add(1)
			ready <- c
		}
	}
	if left.Load() == 0 {
		close(ready)
	}

	quietCtx, stopQuiet := context.WithCancel(runCtx)
	var side sync.WaitGroup
	side.Go(func() {
		for i := 0; ; i++ {
			if backoff.Sleep(quietCtx, quietEvery) != nil {
				return
			}
			// The call itself runs to its outcome: stopping the quiet chat
			// must not cut one short.
			c := app.send(runCtx, quietChat, fmt.Sprintf("quiet %d", i))
			if c.outcome == outcomeNotSent {
				return
			}
			r.quietSent++
			if c.outcome == outcomeOK {
				r.quietWaits = append(r.quietWaits, c.end.Sub(c.start))
			} else {
				r.quietErrs++
			}
		}
	})

	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range ready {
				j := c.jobs[c.next]
				c.next++
				if runCtx.Err() == nil {
					j.call = app.send(runCtx, j.chat, fmt.Sprintf("flood %d", j.id))
				}
				if c.next < len(c.jobs) && runCtx.Err() == nil {
					ready <- c
				} else if left.Add(-1) == 0 {
					close(ready)
				}
			}
		})
	}
	wg.Wait()
	r.wall = time.Since(start)
	stopQuiet()
	side.Wait()
	return r
}

// waitLedger polls tg until every job that was sent without an answer has
// its message in the ledger, or deadline passes.
func waitLedger(ctx context.Context, tg *telegramtest.Server, jobs []*floodJob, deadline time.Time) {
	want := map[int]bool{}
	for _, j := range jobs {
		if !j.call.answered() && j.call.outcome != outcomeNotSent {
			want[j.id] = true
		}
	}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, m := range tg.Messages() {
			if id, ok := floodID(m.Text); ok {
				delete(want, id)
			}
		}
		if len(want) == 0 {
			return
		}
		if backoff.Sleep(ctx, 500*time.Millisecond) != nil {
			return
		}
	}
}

// floodID parses "flood <id>".
func floodID(text string) (int, bool) {
	s, ok := strings.CutPrefix(text, "flood ")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(s)
	return id, err == nil
}

// floodReport is everything the scenario reports.
type floodReport struct {
	flood floodRun
	min   floodMin
	gw    gatewayCounts

	sent, delivered, duplicates int
	app429                      int // 429 answers the app saw, retried ones included
	byOutcome                   map[string]int
	// Per outcome, how many of those messages reached their chat.
	deliveredBy map[string]int
	// okNotDelivered: answered OK yet absent from the ledger.
	okNotDelivered int
	// orderViolations: messages that reached their chat after a later
	// message of the same chat (overtaken).
	orderViolations int
	// arrivedFrom, arrivedTo: for the calls without an answer whose
	// message reached the chat, the range of its arrival less the moment
	// the app saw the error (negative: the message was in the chat before
	// the app was told the connection broke).
	arrivedFrom, arrivedTo time.Duration
	quiet                  int // quiet messages in the ledger
	// longestPrivate, longestGroup: the longest call (first try to
	// outcome) to a private chat, to a group.
	longestPrivate, longestGroup time.Duration
}

// analyzeFlood matches the ledger to the calls.
func analyzeFlood(jobs []*floodJob, msgs []telegramtest.Message, quietChat int64) *floodReport {
	r := &floodReport{byOutcome: map[string]int{}, deliveredBy: map[string]int{}}
	arrived := map[int]time.Time{}
	maxSeq := map[int64]int{}
	for _, m := range msgs {
		if m.ChatID == quietChat {
			r.quiet++
			continue
		}
		id, ok := floodID(m.Text)
		if !ok || id < 0 || id >= len(jobs) {
			continue
		}
		j := jobs[id]
		j.arrivals++
		if j.arrivals > 1 {
			r.duplicates++
			continue
		}
		arrived[id] = m.Time
		if s, seen := maxSeq[j.chat]; seen && j.seq < s {
			r.orderViolations++
		} else {
			maxSeq[j.chat] = j.seq
		}
	}
	for _, j := range jobs {
		c := j.call
		r.byOutcome[c.outcome]++
		r.app429 += c.limited
		if c.outcome == outcome429 {
			r.app429++ // the last one, not waited out
		}
		if c.outcome != outcomeNotSent {
			r.sent++
			if j.group {
				r.longestGroup = max(r.longestGroup, c.end.Sub(c.start))
			} else {
				r.longestPrivate = max(r.longestPrivate, c.end.Sub(c.start))
			}
		}
		if j.arrivals == 0 {
			if c.outcome == outcomeOK {
				r.okNotDelivered++
			}
			continue
		}
		r.delivered++
		r.deliveredBy[c.outcome]++
		if !c.answered() {
			d := arrived[j.id].Sub(c.end)
			if r.deliveredBy[outcomeTimeout]+r.deliveredBy[outcomeConn] == 1 {
				r.arrivedFrom, r.arrivedTo = d, d
			}
			r.arrivedFrom, r.arrivedTo = min(r.arrivedFrom, d), max(r.arrivedTo, d)
		}
	}
	return r
}

// gatewayCounts are serve's own counts, from its /metrics.
type gatewayCounts struct {
	ok          bool
	byOutcome   map[string]float64 // tgrelay_gateway_calls_total summed by outcome
	telegram429 float64
}

// scrapeGatewayMetrics reads the gateway's counters from serve's admin
// listener.
func scrapeGatewayMetrics(ctx context.Context, admin string) (gatewayCounts, error) {
	g := gatewayCounts{byOutcome: map[string]float64{}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return g, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return g, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, " ")
		switch {
		case strings.HasPrefix(name, "tgrelay_gateway_calls_total{"):
			_, o, ok := strings.Cut(name, `outcome="`)
			if !ok {
				continue
			}
			o, _, _ = strings.Cut(o, `"`)
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			g.byOutcome[o] += v
		case name == "tgrelay_gateway_telegram_429_total":
			g.telegram429, _ = strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	g.ok = resp.StatusCode == http.StatusOK
	return g, sc.Err()
}

// report prints the table and the RESULT line.
func (r *floodReport) report(out io.Writer, p floodPlan, workers int) error {
	f := r.flood
	noAnswer := r.byOutcome[outcomeTimeout] + r.byOutcome[outcomeConn]
	noAnswerArrived := r.deliveredBy[outcomeTimeout] + r.deliveredBy[outcomeConn]
	minimum := r.min.value()
	ratio := 0.0
	if minimum > 0 {
		ratio = f.wall.Seconds() / minimum.Seconds()
	}
	quietP50, quietP99 := percentile(f.quietWaits, 0.5), percentile(f.quietWaits, 0.99)
	quietMax := time.Duration(0)
	if len(f.quietWaits) > 0 {
		quietMax = slices.Max(f.quietWaits)
	}
	complete := r.byOutcome[outcomeNotSent] == 0
	sec := func(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	goal429 := r.app429 == 0
	goalAnswer := noAnswerArrived == 0
	goalOrder := r.orderViolations == 0
	// With a minimum of 0 (a flood the limits do not bind) there is
	// nothing to hold the wall time against.
	goalWall := complete && minimum > 0 && ratio <= floodGoalWallRatio
	goalQuiet := len(f.quietWaits) > 0 && quietP99 <= floodGoalQuietP99

	fmt.Fprintf(out, "\nlimit-bound minimum: %s, set by %s (bot %s for %d messages with the quiet chat's %d; busiest private chat %s; busiest group %s)\n",
		sec(minimum), r.min.binding(), sec(r.min.bot), len(f.jobs)+f.quietSent, f.quietSent, sec(r.min.private), sec(r.min.group))
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tvalue\tgoal\t")
	fmt.Fprintf(tw, "429s seen by the app (waited out and retried)\t%d\t0: %s\t\n", r.app429, met(goal429))
	fmt.Fprintf(tw, "calls without an answer whose message reached the chat\t%d of %d\t0: %s\t\n", noAnswerArrived, noAnswer, met(goalAnswer))
	fmt.Fprintf(tw, "  of which the client's timeout / a connection reset or EOF\t%d / %d\t\t\n", r.byOutcome[outcomeTimeout], r.byOutcome[outcomeConn])
	if noAnswerArrived > 0 {
		fmt.Fprintf(tw, "  in the chat, relative to the app's error\t%+.3fs to %+.3fs\t\t\n", r.arrivedFrom.Seconds(), r.arrivedTo.Seconds())
	}
	fmt.Fprintf(tw, "answers 429 (given up) / unknown, and of those in the chat\t%d / %d, %d\t\t\n", r.byOutcome[outcome429], r.byOutcome[outcomeUnknown], r.deliveredBy[outcome429]+r.deliveredBy[outcomeUnknown])
	fmt.Fprintf(tw, "other error answers\t%d\t\t\n", r.byOutcome[outcomeOtherErr])
	fmt.Fprintf(tw, "order violations (overtaken in their chat)\t%d\t0: %s\t\n", r.orderViolations, met(goalOrder))
	fmt.Fprintf(tw, "messages in the chats / sent / planned\t%d / %d / %d\t\t\n", r.delivered, r.sent, len(f.jobs))
	fmt.Fprintf(tw, "answered ok but not in the chat / in the chat twice\t%d / %d\t\t\n", r.okNotDelivered, r.duplicates)
	fmt.Fprintf(tw, "longest call, first try to outcome: private chat / group\t%s / %s\t\t\n", sec(r.longestPrivate), sec(r.longestGroup))
	fmt.Fprintf(tw, "wall time (first call to last outcome)\t%s\t\t\n", sec(f.wall))
	if minimum > 0 {
		fmt.Fprintf(tw, "wall time ÷ limit-bound minimum\t%.3fx\t≤ %.2fx: %s\t\n", ratio, floodGoalWallRatio, met(goalWall))
	} else {
		fmt.Fprintf(tw, "wall time ÷ limit-bound minimum\tn/a\tthe limits do not bind this flood\t\n")
	}
	fmt.Fprintf(tw, "quiet chat p50 / p99 / max (%d answered, %d errors)\t%s / %s / %s\t≤ %s p99: %s\t\n",
		len(f.quietWaits), f.quietErrs, sec(quietP50), sec(quietP99), sec(quietMax), sec(floodGoalQuietP99), met(goalQuiet))
	if r.gw.ok {
		var parts []string
		for _, o := range slices.Sorted(maps.Keys(r.gw.byOutcome)) {
			parts = append(parts, fmt.Sprintf("%s %.0f", o, r.gw.byOutcome[o]))
		}
		fmt.Fprintf(tw, "serve's metrics: gateway calls by outcome\t%s\t\t\n", strings.Join(parts, ", "))
		fmt.Fprintf(tw, "serve's metrics: Telegram's own 429s\t%.0f\t\t\n", r.gw.telegram429)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !complete {
		fmt.Fprintf(out, "the flood was stopped by -timeout: %d messages not sent\n", r.byOutcome[outcomeNotSent])
	}
	fmt.Fprintf(out, "RESULT gateway-flood limits=telegram messages=%d workers=%d privates=%d groups=%d group_messages=%d"+
		" app_429=%d no_answer=%d no_answer_in_chat=%d timeouts=%d resets=%d answered_429=%d answered_unknown=%d other_errors=%d"+
		" order_violations=%d in_chat=%d sent=%d ok_not_in_chat=%d duplicates=%d wall_s=%.2f min_s=%.2f wall_vs_min=%.3f"+
		" quiet_p50_s=%.3f quiet_p99_s=%.3f quiet_n=%d longest_group_call_s=%.1f tg_429=%.0f"+
		" goal_429=%t goal_answer=%t goal_order=%t goal_wall=%t goal_quiet=%t\n",
		len(f.jobs), workers, p.privates, p.groups, p.groupMessages(),
		r.app429, noAnswer, noAnswerArrived, r.byOutcome[outcomeTimeout], r.byOutcome[outcomeConn], r.byOutcome[outcome429], r.byOutcome[outcomeUnknown], r.byOutcome[outcomeOtherErr],
		r.orderViolations, r.delivered, r.sent, r.okNotDelivered, r.duplicates, f.wall.Seconds(), minimum.Seconds(), ratio,
		quietP50.Seconds(), quietP99.Seconds(), len(f.quietWaits), r.longestGroup.Seconds(), r.gw.telegram429,
		goal429, goalAnswer, goalOrder, goalWall, goalQuiet)
	return nil
}
