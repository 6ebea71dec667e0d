package operator

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/tghtml"
	"github.com/tgrelay/tgrelay/throttle"
)

// Defaults and limits of [Config].
const (
	// DefaultMaxQueued is how many messages may wait, besides the one in
	// flight, before the oldest is dropped.
	DefaultMaxQueued = 200
	// DefaultMinInterval is the pause between two sends into the chat:
	// Telegram allows about 20 messages a minute into a group. It is also
	// the shortest wait before a retry.
	DefaultMinInterval = 3 * time.Second
	// DefaultMaxAttempts is how many times one message is sent before it is
	// dropped as DropAttempts.
	DefaultMaxAttempts = 3
	// MaxMaxAttempts bounds Config.MaxAttempts.
	MaxMaxAttempts = 100
	// DefaultSendTimeout bounds one send attempt.
	DefaultSendTimeout = 30 * time.Second
	// TextLimit is the longest text sent, in UTF-16 units of visible text,
	// as Telegram counts it.
	TextLimit = tghtml.TextLimit
	// MaxPostBytes bounds the text Post keeps (after masking) while it
	// waits in the queue; the cut to TextLimit happens when it is sent.
	MaxPostBytes = 64 << 10
)

// ParseModeHTML sends messages with parse_mode HTML. Their text is
// sanitised and truncated by package tghtml, so a message never fails on
// entity parsing.
const ParseModeHTML = "HTML"

// DropReason says why a message will not arrive.
type DropReason string

// The reasons a message is dropped.
const (
	// DropOverflow: the queue was full and this was its oldest message.
	DropOverflow DropReason = "overflow"
	// DropRefused: the send failed in a way that repeating it cannot fix,
	// or whose outcome is unknown (see Drop.Failure).
	DropRefused DropReason = "refused"
	// DropAttempts: the send kept failing in a retryable way MaxAttempts
	// times.
	DropAttempts DropReason = "attempts"
	// DropClosed: the channel was closed before the message was sent, or
	// while it was being sent; then Drop.Failure says whether it may have
	// arrived.
	DropClosed DropReason = "closed"
	// DropRepeated: the dedupe window held it as a repeat.
	DropRepeated DropReason = "repeated"
	// DropOverBudget: the dedupe window's budget was spent.
	DropOverBudget DropReason = "over-budget"
)

// Drop reports a message that will not arrive.
type Drop struct {
	// Topic is the topic it was posted to.
	Topic string
	// Text is its masked text.
	Text string
	// Reason says why it was dropped.
	Reason DropReason
	// Failure is the classified last failure, for DropRefused and
	// DropAttempts, and for DropClosed when Close cut off a send that may
	// have reached Telegram (reason unknown): repeating that message could
	// post it twice. Nil otherwise.
	Failure *botapi.Failure
}

// Message is one send handed to a [SendFunc].
type Message struct {
	// ChatID is the chat to send to.
	ChatID int64
	// ThreadID is the forum topic's message_thread_id; zero for none.
	ThreadID int64
	// Topic is the topic name it was posted to.
	Topic string
	// Text is masked and cut to TextLimit.
	Text string
	// ParseMode is "" (plain text) or ParseModeHTML.
	ParseMode string
}

// SendFunc sends one message. It must return when ctx ends, and return the
// failure as it came, so that [botapi.Classify] can read it.
type SendFunc func(ctx context.Context, m Message) error

// Config configures a [Channel]. [New] copies it (the maps and slices too);
// an invalid field is an error naming it.
type Config struct {
	// ChatID is the operator chat. Required. Sends are paced for this one
	// chat; when Telegram reports that the group migrated to a supergroup,
	// the channel re-targets the new chat id for this and later messages.
	ChatID int64
	// Topics maps topic names to forum message_thread_id values (positive).
	// A topic not listed posts to the chat itself.
	Topics map[string]int64
	// Client sends through the Bot API's sendMessage, with link previews
	// disabled; its exact token is also masked. Exactly one of Client and
	// SendFunc is required.
	Client *botapi.Client
	// SendFunc sends instead of Client (for another bot library).
	SendFunc SendFunc
	// ParseMode is "" (plain text, the default: never fails on entities) or
	// ParseModeHTML.
	ParseMode string
	// MaxQueued bounds the messages waiting besides the one in flight.
	// Zero means DefaultMaxQueued.
	MaxQueued int
	// MinInterval is the pause between two sends, remembered across idle
	// periods, and the shortest wait before a retry. Zero means
	// DefaultMinInterval.
	MinInterval time.Duration
	// MaxAttempts is how many times one message is sent. Zero means
	// DefaultMaxAttempts; at most MaxMaxAttempts. Only not-dispatched
	// sends, Telegram's 429 and Telegram's own 5xx are retried; a 429's
	// retry_after is waited in full (botapi bounds it by
	// botapi.MaxRetryAfter), and Close ends that wait.
	MaxAttempts int
	// SendTimeout bounds one send attempt. Zero means DefaultSendTimeout.
	SendTimeout time.Duration
	// OnDrop receives every message that will not arrive. It runs on the
	// goroutine that dropped it (Post's, the worker's, or Close's), with no
	// lock held; it must return promptly and must not call Close. A panic
	// in it is recovered. Nil means drops are not reported.
	OnDrop func(Drop)
	// SensitivePatterns are masked in every text (see [botapi.Redactor]). A
	// pattern that matches the empty string is an error.
	SensitivePatterns []*regexp.Regexp
	// SensitiveValues are masked wherever they appear, the longest first so
	// that a secret containing another is masked whole, also URL-escaped
	// (see [botapi.Redactor]). Empty values are ignored; a value shorter
	// than [botapi.MinSecretLen] is an error.
	SensitiveValues []string
	// Limiter, when set, is the bot's limiter shared by every sender of
	// the process (the gateway, a broadcast): each send also waits its
	// turn there and reports Telegram's 429 to it, so they all spend one
	// budget. Nil means the channel paces itself only (MinInterval).
	Limiter *throttle.Limiter
	// Dedupe, when not nil, holds repeats and caps messages per window (see
	// [Dedupe]). Its counts are flushed as summary messages when no later
	// message carries them.
	Dedupe *DedupeConfig
}

// Channel is the operator alert channel. It is safe for concurrent use. Its
// worker goroutine runs only while messages wait; call [Channel.Close] when
// done (after [Channel.Drain] to let queued messages go out).
type Channel struct {
	cfg    Config
	red    botapi.Redactor // SensitiveValues and SensitivePatterns
	dedupe *Dedupe
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu         sync.Mutex
	chatID     int64 // may change when the group migrates
	queue      []queued
	inFlight   bool
	running    bool
	closed     bool
	idle       chan struct{} // closed when the running worker finds no work
	workerDone chan struct{} // closed when the running worker has returned
	next       time.Time     // earliest start of the next send: the pace
	flushTimer *time.Timer
}

type queued struct{ topic, text string }

// ConfigError is an invalid [Config] field: Field names it ("ChatID")
// and Err says what is wrong. It is the one config error type of every
// tgrelay package.
type ConfigError = configerr.Error

func badField(field, format string, args ...any) error {
	return configerr.New("operator", field, format, args...)
}

// New returns a Channel configured by a copy of cfg, or a *[ConfigError]
// naming the first invalid field. It starts no goroutine.
func New(cfg Config) (*Channel, error) {
	if cfg.ChatID == 0 {
		return nil, badField("ChatID", "is required")
	}
	if (cfg.Client == nil) == (cfg.SendFunc == nil) {
		return nil, badField("Client", "is required, or SendFunc: exactly one of the two")
	}
	if cfg.ParseMode != "" && cfg.ParseMode != ParseModeHTML {
		return nil, badField("ParseMode", "is %q: want empty or %q", cfg.ParseMode, ParseModeHTML)
	}
	topics := make(map[string]int64, len(cfg.Topics))
	for name, id := range cfg.Topics {
		if id <= 0 {
			return nil, badField(fmt.Sprintf("Topics[%q]", name), "is %d: want a positive thread id", id)
		}
		topics[name] = id
	}
	cfg.Topics = topics
	ints := []struct {
		name     string
		v        *int
		def, max int
	}{
		{"MaxQueued", &cfg.MaxQueued, DefaultMaxQueued, 0},
		{"MaxAttempts", &cfg.MaxAttempts, DefaultMaxAttempts, MaxMaxAttempts},
	}
	for _, f := range ints {
		switch {
		case *f.v < 0 || (f.max > 0 && *f.v > f.max):
			return nil, badField(f.name, "is %d: out of range", *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"MinInterval", &cfg.MinInterval, DefaultMinInterval},
		{"SendTimeout", &cfg.SendTimeout, DefaultSendTimeout},
	}
	for _, f := range durations {
		switch {
		case *f.v < 0:
			return nil, badField(f.name, "is %v: want 0 or more", *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	for i, v := range cfg.SensitiveValues {
		if v != "" && len(v) < botapi.MinSecretLen {
			return nil, badField(fmt.Sprintf("SensitiveValues[%d]", i), "is shorter than %d bytes (it would mask ordinary words)", botapi.MinSecretLen)
		}
	}
	c := &Channel{chatID: cfg.ChatID}
	if err := c.red.AddPattern(cfg.SensitivePatterns...); err != nil {
		return nil, badField("SensitivePatterns", "is not valid: %w", err)
	}
	c.red.Add(cfg.SensitiveValues...)
	cfg.SensitivePatterns, cfg.SensitiveValues = nil, nil
	c.cfg = cfg
	if cfg.Dedupe != nil {
		dc := *cfg.Dedupe
		if cfg.ParseMode == ParseModeHTML {
			dc = escapedLines(dc)
		}
		d, err := NewDedupe(dc)
		if err != nil {
			return nil, err
		}
		c.dedupe = d
		cfg.Dedupe = &dc
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// escapedLines makes the dedupe count lines safe inside HTML.
func escapedLines(dc DedupeConfig) DedupeConfig {
	repeated, over := dc.RepeatedLineFunc, dc.OverBudgetLineFunc
	if repeated != nil {
		dc.RepeatedLineFunc = func(n int) string { return tghtml.Escape(repeated(n)) }
	}
	if over != nil {
		dc.OverBudgetLineFunc = func(n int) string { return tghtml.Escape(over(n)) }
	}
	return dc
}

// Post queues text for topic ("" for the chat itself) and returns at once.
// It never panics and never waits for the network: a message that will not
// be sent is reported to OnDrop instead (closed, repeated, over-budget, or
// overflow for the oldest queued message it pushes out).
func (c *Channel) Post(text, topic string) {
	defer func() { _ = recover() }()
	text = cutBytes(c.mask(text), MaxPostBytes)
	if c.isClosed() {
		c.report(Drop{Topic: topic, Text: text, Reason: DropClosed})
		return
	}
	var summaries []Summary
	if c.dedupe != nil {
		v := c.admit(text, topic)
		if !v.Send {
			c.report(Drop{Topic: topic, Text: text, Reason: v.Reason})
			c.scheduleFlush()
			return
		}
		text = v.Text
		summaries = c.dedupe.Flush()
	}
	c.mu.Lock()
	drops := c.enqueueLocked(nil, queued{topic, text})
	for _, s := range summaries {
		drops = c.enqueueLocked(drops, queued{s.Topic, s.Text})
	}
	c.mu.Unlock()
	c.report(drops...)
	if c.dedupe != nil {
		c.scheduleFlush()
	}
}

// admit asks the dedupe window, admitting the text unchanged if a
// configured function panics.
func (c *Channel) admit(text, topic string) (v Verdict) {
	defer func() {
		if recover() != nil {
			v = Verdict{Send: true, Text: text}
		}
	}()
	return c.dedupe.Admit(text, topic)
}

func (c *Channel) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// enqueueLocked appends m, dropping the oldest beyond MaxQueued, and starts
// the worker. It returns drops extended with what must be reported.
func (c *Channel) enqueueLocked(drops []Drop, m queued) []Drop {
	if c.closed {
		return append(drops, Drop{Topic: m.topic, Text: m.text, Reason: DropClosed})
	}
	c.queue = append(c.queue, m)
	for len(c.queue) > c.cfg.MaxQueued {
		old := c.queue[0]
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
		drops = append(drops, Drop{Topic: old.topic, Text: old.text, Reason: DropOverflow})
	}
	if !c.running {
		c.running = true
		c.idle = make(chan struct{})
		c.workerDone = make(chan struct{})
		go c.work(c.idle, c.workerDone)
	}
	return drops
}

// scheduleFlush arms the timer for the next due dedupe summary.
func (c *Channel) scheduleFlush() {
	due, ok := c.dedupe.NextFlush()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok || c.closed {
		return
	}
	wait := time.Until(due)
	if c.flushTimer == nil {
		c.flushTimer = time.AfterFunc(wait, c.flushDue)
	} else {
		c.flushTimer.Reset(wait)
	}
}

// flushDue queues the dedupe summaries that are due.
func (c *Channel) flushDue() {
	defer func() { _ = recover() }()
	summaries := c.dedupe.Flush()
	c.mu.Lock()
	var drops []Drop
	for _, s := range summaries {
		drops = c.enqueueLocked(drops, queued{s.Topic, s.Text})
	}
	c.mu.Unlock()
	c.report(drops...)
	c.scheduleFlush()
}

// work sends queued messages one at a time until the queue is empty or the
// channel is closed.
func (c *Channel) work(idle, done chan struct{}) {
	defer close(done)
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.closed {
			c.running = false
			c.inFlight = false
			close(idle)
			c.mu.Unlock()
			return
		}
		m := c.queue[0]
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
		c.inFlight = true
		c.mu.Unlock()

		if d := c.deliver(m); d != nil {
			c.report(*d)
		}
	}
}

// deliver sends m, retrying as the failure allows, and returns the drop to
// report, or nil once it was sent.
func (c *Channel) deliver(m queued) *Drop {
	drop := func(reason DropReason, f *botapi.Failure) *Drop {
		return &Drop{Topic: m.topic, Text: m.text, Reason: reason, Failure: f}
	}
	text := c.fit(m.text)
	for attempt := 1; ; attempt++ {
		if !c.waitTurn() {
			return drop(DropClosed, nil)
		}
		c.mu.Lock()
		msg := Message{ChatID: c.chatID, ThreadID: c.cfg.Topics[m.topic], Topic: m.topic, Text: text, ParseMode: c.cfg.ParseMode}
		c.mu.Unlock()

		permit, ok := c.turn(msg.ChatID)
		if !ok {
			return drop(DropClosed, nil)
		}
		err := c.send(msg)
		finishTurn(permit, err)
		now := time.Now()
		c.mu.Lock()
		c.next = now.Add(c.cfg.MinInterval)
		c.mu.Unlock()
		if err == nil {
			return nil
		}
		f := botapi.Classify(err)
		if c.ctx.Err() != nil {
			if f.Reason == botapi.ReasonUnknown {
				return drop(DropClosed, &f)
			}
			return drop(DropClosed, nil)
		}
		switch {
		case f.Reason == botapi.ReasonChatMigrated && f.MigrateToChatID != 0:
			c.mu.Lock()
			c.chatID = f.MigrateToChatID
			c.mu.Unlock()
		case !f.Retryable:
			return drop(DropRefused, &f)
		}
		if attempt >= c.cfg.MaxAttempts {
			return drop(DropAttempts, &f)
		}
		if f.RetryAfter > c.cfg.MinInterval {
			c.mu.Lock()
			c.next = now.Add(f.RetryAfter)
			c.mu.Unlock()
		}
	}
}

// turn waits for the send's turn in Config.Limiter, when one is shared (a
// refusal is waited out and asked again); false if the channel closed
// meanwhile. The permit is nil without a limiter.
func (c *Channel) turn(chatID int64) (*throttle.Permit, bool) {
	if c.cfg.Limiter == nil {
		return nil, true
	}
	for {
		p, err := c.cfg.Limiter.Wait(c.ctx, "sendMessage", chatID)
		var werr *throttle.WaitError
		if !errors.As(err, &werr) {
			return p, err == nil
		}
		if backoff.Sleep(c.ctx, werr.RetryAfter) != nil {
			return nil, false
		}
	}
}

// finishTurn tells the shared limiter how a send ended: Telegram's 429
// pauses what it must, a send that never left does not count, anything
// else counts as sent now.
func finishTurn(p *throttle.Permit, err error) {
	if p == nil {
		return
	}
	if err == nil {
		p.Done()
		return
	}
	switch f := botapi.Classify(err); {
	case f.Reason == botapi.ReasonRateLimited:
		p.Limited(f.RetryAfter)
	case f.Reason == botapi.ReasonNotDispatched:
		p.Cancel()
	default:
		p.Done()
	}
}

// waitTurn waits until the pace allows the next send; false if the channel
// closed meanwhile.
func (c *Channel) waitTurn() bool {
	c.mu.Lock()
	wait := time.Until(c.next)
	c.mu.Unlock()
	if c.ctx.Err() != nil {
		return false
	}
	return backoff.Sleep(c.ctx, wait) == nil
}

// send makes one attempt, bounded by SendTimeout; a panicking SendFunc is a
// failure.
func (c *Channel) send(m Message) (err error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SendTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("operator: SendFunc panicked")
		}
	}()
	if c.cfg.SendFunc != nil {
		return c.cfg.SendFunc(ctx, m)
	}
	params := map[string]any{
		"chat_id":              m.ChatID,
		"text":                 m.Text,
		"link_preview_options": map[string]any{"is_disabled": true},
	}
	if m.ThreadID != 0 {
		params["message_thread_id"] = m.ThreadID
	}
	if m.ParseMode != "" {
		params["parse_mode"] = m.ParseMode
	}
	_, err = c.cfg.Client.Call(ctx, "sendMessage", params)
	return err
}

// report hands drops to OnDrop, recovering its panics.
func (c *Channel) report(drops ...Drop) {
	if c.cfg.OnDrop == nil {
		return
	}
	for _, d := range drops {
		func() {
			defer func() { _ = recover() }()
			c.cfg.OnDrop(d)
		}()
	}
}

// mask replaces secrets in text with [botapi.Redacted]: the client's own
// token, then the configured values and patterns and the bot token's shape.
func (c *Channel) mask(text string) string {
	if c.cfg.Client != nil {
		text = c.cfg.Client.Redact(text)
	}
	return c.red.Redact(text)
}

// fit cuts text to TextLimit UTF-16 units of what Telegram shows.
func (c *Channel) fit(text string) string {
	if c.cfg.ParseMode == ParseModeHTML {
		if out, err := tghtml.Truncate(text, TextLimit); err == nil {
			return out
		}
		return tghtml.TruncateText(tghtml.Text(text), TextLimit)
	}
	return tghtml.TruncateText(text, TextLimit)
}

// Pending returns how many messages wait, the one in flight included.
func (c *Channel) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.queue)
	if c.inFlight {
		n++
	}
	return n
}

// Drain waits until no message waits or is in flight, and returns nil, or
// returns ctx's error when ctx ends first. Summaries the dedupe window will
// flush later are not waited for. Recommended shutdown: Drain within a grace
// period, then Close.
func (c *Channel) Drain(ctx context.Context) error {
	c.mu.Lock()
	running, idle := c.running, c.idle
	c.mu.Unlock()
	if !running {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the channel: the send in flight is cancelled and, unless it
// had already succeeded, dropped; every queued message, every held dedupe
// count and every later Post is dropped as DropClosed. Close returns once the
// worker has stopped. It is idempotent and must not be called from OnDrop.
func (c *Channel) Close() {
	c.mu.Lock()
	if c.closed {
		done := c.workerDone
		c.mu.Unlock()
		if done != nil {
			<-done
		}
		return
	}
	c.closed = true
	if c.flushTimer != nil {
		c.flushTimer.Stop()
	}
	drops := make([]Drop, 0, len(c.queue))
	for _, m := range c.queue {
		drops = append(drops, Drop{Topic: m.topic, Text: m.text, Reason: DropClosed})
	}
	c.queue = nil
	done := c.workerDone
	c.mu.Unlock()
	if c.dedupe != nil {
		for _, s := range c.dedupe.FlushAll() {
			drops = append(drops, Drop{Topic: s.Topic, Text: s.Text, Reason: DropClosed})
		}
	}
	// Queued messages are reported before the in-flight send is cancelled,
	// so drops arrive in the order the messages were posted.
	c.report(drops...)
	c.cancel()
	if done != nil {
		<-done
	}
}

// cutBytes cuts s to at most n bytes at a rune boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
