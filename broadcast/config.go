package broadcast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/throttle"
)

// Defaults and bounds of [Config].
const (
	// DefaultRate is the default of Config.Rate: sends started per second,
	// below Telegram's bot-wide 30/s.
	DefaultRate = 25.0
	// MinRate and MaxRate bound Config.Rate; MinRate keeps every pacing
	// wait under 100 s.
	MinRate = 0.01
	MaxRate = 10_000.0
	// DefaultConcurrency is the default of Config.Concurrency.
	DefaultConcurrency = 8
	// MaxConcurrency bounds Config.Concurrency.
	MaxConcurrency = 256
	// DefaultMaxAttempts is the default of Config.MaxAttempts.
	DefaultMaxAttempts = 5
	// MaxMaxAttempts bounds Config.MaxAttempts.
	MaxMaxAttempts = 100
	// DefaultMaxRetryDelay is the default of Config.MaxRetryDelay.
	DefaultMaxRetryDelay = 60 * time.Second
	// MaxBackoff caps the transient backoff (1 s doubling, no jitter).
	MaxBackoff = 60 * time.Second
	// DefaultSendTimeout is the default of Config.SendTimeout.
	DefaultSendTimeout = 60 * time.Second
	// MaxSendTimeout bounds Config.SendTimeout.
	MaxSendTimeout = 10 * time.Minute
	// DefaultProgressInterval is the default of Config.ProgressInterval.
	DefaultProgressInterval = 10 * time.Second
	// MaxNameLen is the longest broadcast name.
	MaxNameLen = 128
	// BurstWindow sizes the token bucket: it holds Rate × BurstWindow
	// tokens (at least one; 20 at 1000/s, 1 at 30/s) and starts full, so
	// sends that the scheduler or a slow fsync held back catch up instead
	// of losing their turn. Over any second at most Rate tokens are handed
	// out, plus that burst; a send starts once it has its token (and, the
	// first time, once its intent line is durable).
	BurstWindow = 20 * time.Millisecond
)

// ErrInvalidName is returned (wrapped) for a name that is not 1–128 of
// [A-Za-z0-9._-] starting with a letter or digit.
var ErrInvalidName = errors.New("broadcast: invalid name")

// Config configures one [Run]. Run copies it.
type Config struct {
	// Name identifies the broadcast; running the same name again resumes
	// it. 1–128 characters of letters, digits, '.', '_' and '-', starting
	// with a letter or digit. Required.
	Name string
	// Dir is the state root. The broadcast keeps its files in Dir/Name/:
	// audience.json (the snapshot), journal.ndjson and lock. Required.
	Dir string
	// AudienceFunc returns the recipients. It is called once, on the first
	// run; the validated, de-duplicated result is written as a snapshot that
	// every later run uses (a changed audience is ignored). It may be nil
	// when the snapshot exists.
	AudienceFunc func(ctx context.Context) ([]Recipient, error)
	// SendFunc delivers the message to one recipient and returns the
	// provider's refusal as it came (for the default classifier, an error
	// from package botapi). It is called from several goroutines at once
	// (Config.Concurrency). Its ctx is not cancelled when the run is
	// stopped or halted, so a send in flight finishes and is recorded; it
	// carries the Config.SendTimeout deadline. Required unless DryRun.
	SendFunc func(ctx context.Context, r Recipient) error
	// ClassifyFunc turns a send error into a [Verdict]. Nil means
	// [Classify]. An invalid verdict ends the run with [ErrInvalidVerdict].
	ClassifyFunc func(err error) Verdict
	// Rate is the number of sends (retries included) started per second,
	// across all senders, through one token bucket of Rate × BurstWindow
	// tokens (at least one). Zero means DefaultRate; otherwise it must be
	// in [MinRate, MaxRate].
	Rate float64
	// Concurrency is the most sends in flight at once. Zero means
	// DefaultConcurrency; 1..MaxConcurrency. To reach Rate, it must exceed
	// Rate × the time one send takes; [WindowFor] sizes it from a latency
	// the caller observed.
	Concurrency int
	// MaxAttempts is the most tries of one recipient on retryable failures.
	// Zero means DefaultMaxAttempts; 1..MaxMaxAttempts.
	MaxAttempts int
	// MaxRetryDelay is the longest provider wait (retry_after) the run
	// honours; a longer one halts the broadcast with the recipient pending.
	// It also caps the transient backoff. Zero means DefaultMaxRetryDelay;
	// at most MaxPause.
	MaxRetryDelay time.Duration
	// SendTimeout bounds each SendFunc call. Zero means DefaultSendTimeout;
	// at most MaxSendTimeout.
	SendTimeout time.Duration
	// ProgressFunc, when set, receives a report at the start, after a
	// settled recipient once ProgressInterval has passed since the last one,
	// and at the end. Calls never overlap; a panic in it is recovered.
	ProgressFunc func(Report)
	// ProgressInterval is the least time between two running reports. Zero
	// means DefaultProgressInterval; negative means after every recipient.
	ProgressInterval time.Duration
	// Limiter, when set, is the bot's limiter shared by every sender of
	// the process (the gateway, the operator channel): each send also
	// waits its turn there, as a sendMessage to the recipient's chat, and
	// Telegram's 429 is reported to it, so all of them spend one budget.
	// Rate still caps the broadcast's own share. Nil means the broadcast
	// paces itself only.
	Limiter *throttle.Limiter
	// DryRun counts the audience and the journal's outcomes without taking
	// the lock, writing any file or sending.
	DryRun bool
	// Fingerprint identifies the message and the options that shape what
	// recipients receive (see [Message.Fingerprint]); at most
	// [MaxFingerprintLen] bytes. The first run keeps it in the snapshot; a
	// later run with a different one fails with [ErrMessageChanged], so a
	// broadcast never resumes with another message. Empty (here or in the
	// snapshot) skips the check.
	Fingerprint string
	// RepairUncertain is the operator's choice for a damaged journal (see
	// [ErrJournalDamaged]): every recipient without an outcome in the
	// journal's intact lines is recorded uncertain (never sent again), the
	// damaged journal is kept beside the repaired one, and the run goes on.
	// False means a damaged journal fails the run with a [*DamageError]. It
	// changes nothing when the journal is intact.
	RepairUncertain bool
}

// ValidName reports whether s can name a broadcast: 1 to [MaxNameLen]
// ASCII letters, digits, '.', '_' and '-', starting with a letter or digit,
// so that it is a safe directory name. [Run] refuses any other name with
// [ErrInvalidName]; tools that take a name from a user check it first.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c|0x20) >= 'a' && (c|0x20) <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

// ConfigError is an invalid [Config] field: Field names it ("Rate") and
// Err says what is wrong; an invalid name also matches [ErrInvalidName].
// It is the one config error type of every tgrelay package.
type ConfigError = configerr.Error

func badField(field, format string, args ...any) error {
	return configerr.New("broadcast", field, format, args...)
}

// withDefaults validates c and returns a copy with defaults filled in. An
// invalid field is an error naming it.
func (c Config) withDefaults() (Config, error) {
	if !ValidName(c.Name) {
		return c, &ConfigError{Pkg: "broadcast", Field: "Name", Err: fmt.Errorf("%.140q is not a broadcast name", c.Name), Kind: ErrInvalidName}
	}
	if c.Dir == "" {
		return c, badField("Dir", "is required")
	}
	if len(c.Fingerprint) > MaxFingerprintLen {
		return c, badField("Fingerprint", "is longer than %d bytes", MaxFingerprintLen)
	}
	if c.SendFunc == nil && !c.DryRun {
		return c, badField("SendFunc", "is required")
	}
	if c.ClassifyFunc == nil {
		c.ClassifyFunc = Classify
	}
	switch {
	case math.IsNaN(c.Rate) || c.Rate < 0 || (c.Rate > 0 && c.Rate < MinRate) || c.Rate > MaxRate:
		return c, badField("Rate", "is %v: want %v to %v", c.Rate, MinRate, MaxRate)
	case c.Rate == 0:
		c.Rate = DefaultRate
	}
	switch {
	case c.Concurrency < 0 || c.Concurrency > MaxConcurrency:
		return c, badField("Concurrency", "is %d: want 1 to %d", c.Concurrency, MaxConcurrency)
	case c.Concurrency == 0:
		c.Concurrency = DefaultConcurrency
	}
	switch {
	case c.MaxAttempts < 0 || c.MaxAttempts > MaxMaxAttempts:
		return c, badField("MaxAttempts", "is %d: want 1 to %d", c.MaxAttempts, MaxMaxAttempts)
	case c.MaxAttempts == 0:
		c.MaxAttempts = DefaultMaxAttempts
	}
	switch {
	case c.MaxRetryDelay < 0 || c.MaxRetryDelay > MaxPause:
		return c, badField("MaxRetryDelay", "is %v: want 0 to %v", c.MaxRetryDelay, MaxPause)
	case c.MaxRetryDelay == 0:
		c.MaxRetryDelay = DefaultMaxRetryDelay
	}
	switch {
	case c.SendTimeout < 0 || c.SendTimeout > MaxSendTimeout:
		return c, badField("SendTimeout", "is %v: want 0 to %v", c.SendTimeout, MaxSendTimeout)
	case c.SendTimeout == 0:
		c.SendTimeout = DefaultSendTimeout
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	return c, nil
}

// burst is the token bucket's size: Rate × BurstWindow, at least 1.
func (c *Config) burst() int {
	return max(1, int(c.Rate*BurstWindow.Seconds()))
}

// WindowFor returns a Config.Concurrency that lets rate (sends per second)
// be reached when one send takes latency, as observed (for instance the
// time a getMe or the first sends took), not only as expected: twice the
// sends in flight at that latency, so that as many again wait for their
// token and a latency spike or a slow journal fsync up to one latency long
// does not leave the rate unused. The result is within
// DefaultConcurrency..MaxConcurrency; a rate or latency that is not
// positive gives DefaultConcurrency.
func WindowFor(rate float64, latency time.Duration) int {
	if !(rate > 0) || latency <= 0 {
		return DefaultConcurrency
	}
	n := math.Ceil(2 * rate * latency.Seconds())
	if n >= MaxConcurrency {
		return MaxConcurrency
	}
	return max(DefaultConcurrency, int(n))
}

// backoff returns the transient delay before attempt+1: 1 s doubling, capped
// at min(MaxBackoff, MaxRetryDelay), at least 1 ms, no jitter.
func (c *Config) backoff(attempt int) time.Duration {
	ceiling := max(time.Millisecond, min(MaxBackoff, c.MaxRetryDelay))
	return backoff.Capped{Base: time.Second, Max: ceiling}.Delay(attempt)
}
