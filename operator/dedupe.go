package operator

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults of [DedupeConfig].
const (
	// DefaultDedupeWindow is how long one fingerprint is sent at most once,
	// and the length of the budget's window.
	DefaultDedupeWindow = 10 * time.Minute
	// DefaultDedupeMaxPerWindow is how many messages, whatever their
	// fingerprint, are admitted per window.
	DefaultDedupeMaxPerWindow = 20
	// MaxFingerprintRunes is the length the default fingerprint cuts the
	// normalised text to.
	MaxFingerprintRunes = 300
)

// DedupeConfig configures a [Dedupe]. The zero value is ready to use. The
// functions are called with the Dedupe's lock held and must not call back
// into it.
type DedupeConfig struct {
	// Window is how long a fingerprint, once admitted, holds its repeats; it
	// is also the length of the tumbling budget window. Zero means
	// DefaultDedupeWindow.
	Window time.Duration
	// MaxPerWindow is how many messages are admitted per window. Zero means
	// DefaultDedupeMaxPerWindow.
	MaxPerWindow int
	// FingerprintFunc names the "same message". Nil means [Fingerprint].
	FingerprintFunc func(text, topic string) string
	// RepeatedLineFunc phrases n held repeats. Nil means "(+n more like
	// this)".
	RepeatedLineFunc func(n int) string
	// OverBudgetLineFunc phrases n messages held over the budget. Nil means
	// "(+n more messages over the limit)".
	OverBudgetLineFunc func(n int) string
}

// Verdict is what [Dedupe.Admit] decided.
type Verdict struct {
	// Send reports that the message is admitted.
	Send bool
	// Text is the text to send when Send is true: the message, followed by
	// the count lines it carries, separated by blank lines.
	Text string
	// Reason is DropRepeated or DropOverBudget when Send is false.
	Reason DropReason
}

// Summary is a count of held messages that no admitted message carried
// before its window ended, returned by [Dedupe.Flush] so it is never lost.
type Summary struct {
	// Topic is the topic of the held repeats; "" (the chat itself) for
	// the over-budget count, which spans topics.
	Topic string
	// Text reports the count: the last held text followed by the repeated
	// line, or the over-budget line alone.
	Text string
}

// Dedupe keeps one fingerprint from being sent more than once per window,
// and caps how many messages a window admits. Held messages are counted and
// the count rides on the next admitted message of the same fingerprint (or,
// for the budget, on the next admitted message), or is returned by Flush
// once its window has ended: counts are never silently lost. It is safe for
// concurrent use; time comes from the time package.
type Dedupe struct {
	cfg DedupeConfig

	mu          sync.Mutex
	entries     map[string]*dedupeEntry
	windowStart time.Time
	windowCount int
	overBudget  int
}

type dedupeEntry struct {
	topic    string
	sentAt   time.Time
	held     int
	lastHeld string
}

// NewDedupe returns a Dedupe configured by a copy of cfg, or an error naming
// the first invalid field.
func NewDedupe(cfg DedupeConfig) (*Dedupe, error) {
	switch {
	case cfg.Window < 0:
		return nil, fmt.Errorf("operator: DedupeConfig.Window must not be negative, got %v", cfg.Window)
	case cfg.Window == 0:
		cfg.Window = DefaultDedupeWindow
	}
	switch {
	case cfg.MaxPerWindow < 0:
		return nil, fmt.Errorf("operator: DedupeConfig.MaxPerWindow must not be negative, got %d", cfg.MaxPerWindow)
	case cfg.MaxPerWindow == 0:
		cfg.MaxPerWindow = DefaultDedupeMaxPerWindow
	}
	if cfg.FingerprintFunc == nil {
		cfg.FingerprintFunc = Fingerprint
	}
	if cfg.RepeatedLineFunc == nil {
		cfg.RepeatedLineFunc = func(n int) string { return "(+" + strconv.Itoa(n) + " more like this)" }
	}
	if cfg.OverBudgetLineFunc == nil {
		cfg.OverBudgetLineFunc = func(n int) string { return "(+" + strconv.Itoa(n) + " more messages over the limit)" }
	}
	return &Dedupe{cfg: cfg, entries: make(map[string]*dedupeEntry)}, nil
}

var (
	uuidShape   = regexp.MustCompile(`[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}`)
	longIDShape = regexp.MustCompile(`[A-Za-z0-9]{20,}`)
	digitsShape = regexp.MustCompile(`[0-9]+`)
)

// Fingerprint is the default fingerprint: the topic, a NUL, then the text
// with UUIDs, words of 20 or more letters and digits, and then every run of
// digits replaced by "#", cut to MaxFingerprintRunes runes. So "payment 17
// failed" and "payment 18 failed" are the same message, and the same text in
// another topic is another.
func Fingerprint(text, topic string) string {
	s := uuidShape.ReplaceAllString(text, "#")
	s = longIDShape.ReplaceAllString(s, "#")
	s = digitsShape.ReplaceAllString(s, "#")
	if utf8.RuneCountInString(s) > MaxFingerprintRunes {
		n := 0
		for i := range s {
			if n == MaxFingerprintRunes {
				s = s[:i]
				break
			}
			n++
		}
	}
	return topic + "\x00" + s
}

// Admit decides whether text (already masked) in topic is sent now.
//
// A fingerprint admitted less than Window ago holds the message as
// DropRepeated (a repeat spends no budget). Otherwise, once MaxPerWindow
// messages were admitted in the current window, the message is held as
// DropOverBudget. Otherwise it is admitted, and its text carries the count of
// its fingerprint's held repeats and the count of messages held over budget.
func (d *Dedupe) Admit(text, topic string) Verdict {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()

	key := d.cfg.FingerprintFunc(text, topic)
	prev := d.entries[key]
	if prev != nil && now.Sub(prev.sentAt) < d.cfg.Window {
		prev.held++
		prev.lastHeld = text
		return Verdict{Reason: DropRepeated}
	}
	if d.windowStart.IsZero() || now.Sub(d.windowStart) >= d.cfg.Window {
		d.windowStart, d.windowCount = now, 0
	}
	if d.windowCount >= d.cfg.MaxPerWindow {
		d.overBudget++
		return Verdict{Reason: DropOverBudget}
	}
	d.windowCount++
	d.prune(now)
	d.entries[key] = &dedupeEntry{topic: topic, sentAt: now}

	parts := []string{text}
	if prev != nil && prev.held > 0 {
		parts = append(parts, d.cfg.RepeatedLineFunc(prev.held))
	}
	if d.overBudget > 0 {
		parts = append(parts, d.cfg.OverBudgetLineFunc(d.overBudget))
		d.overBudget = 0
	}
	return Verdict{Send: true, Text: joinParagraphs(parts)}
}

// prune forgets fingerprints whose window has ended and that hold nothing;
// those holding repeats stay until a message or Flush reports them.
func (d *Dedupe) prune(now time.Time) {
	for k, e := range d.entries {
		if e.held == 0 && now.Sub(e.sentAt) >= d.cfg.Window {
			delete(d.entries, k)
		}
	}
}

// Flush returns, and forgets, the counts whose window has ended without an
// admitted message carrying them: a fingerprint's held repeats more than
// Window after it was sent, and the over-budget count once its window has
// ended. Call it when [Dedupe.NextFlush] says; [Channel] does.
func (d *Dedupe) Flush() []Summary {
	return d.flush(false)
}

// FlushAll returns, and forgets, every held count, due or not.
func (d *Dedupe) FlushAll() []Summary {
	return d.flush(true)
}

func (d *Dedupe) flush(all bool) []Summary {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Summary
	keys := make([]string, 0, len(d.entries))
	for k := range d.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return d.entries[a].sentAt.Compare(d.entries[b].sentAt) })
	for _, k := range keys {
		e := d.entries[k]
		if e.held == 0 || (!all && now.Sub(e.sentAt) <= d.cfg.Window) {
			continue
		}
		parts := []string{e.lastHeld}
		if e.held > 1 {
			parts = append(parts, d.cfg.RepeatedLineFunc(e.held-1))
		}
		out = append(out, Summary{Topic: e.topic, Text: joinParagraphs(parts)})
		delete(d.entries, k)
	}
	if d.overBudget > 0 && (all || now.Sub(d.windowStart) > d.cfg.Window) {
		out = append(out, Summary{Text: d.cfg.OverBudgetLineFunc(d.overBudget)})
		d.overBudget = 0
	}
	return out
}

// NextFlush returns when the earliest held count becomes due for
// [Dedupe.Flush], and false when nothing is held.
func (d *Dedupe) NextFlush() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var next time.Time
	for _, e := range d.entries {
		if e.held > 0 {
			if due := e.sentAt.Add(d.cfg.Window + time.Nanosecond); next.IsZero() || due.Before(next) {
				next = due
			}
		}
	}
	if d.overBudget > 0 {
		if due := d.windowStart.Add(d.cfg.Window + time.Nanosecond); next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next, !next.IsZero()
}

func joinParagraphs(parts []string) string {
	out := parts[0]
	for _, p := range parts[1:] {
		out += "\n\n" + p
	}
	return out
}
