// Package poll receives Telegram updates by long polling (getUpdates) into
// an intake Runner, confirming each batch only after every update in it is
// recorded durably.
//
// Telegram forgets the updates of a getUpdates answer only when the next call
// names an offset past them. A [Poller] therefore hands every element of a
// batch, as the raw bytes Telegram sent, to its accept function (usually
// [intake.Runner.Accept], whose concurrent calls share one group commit:
// the chats of a batch are accepted concurrently, and the updates of one
// chat one after another, in update_id order, so that they are forwarded
// in that order), and
// moves its offset past the batch only when all of them were recorded (or were
// already recorded). If any accept fails, the offset stays put and the same
// batch comes back after a bounded backoff: nothing is lost, and the updates
// that were recorded come back as harmless duplicates.
//
// Errors that cannot heal by waiting end [Poller.Run]: a refused token
// ([ErrUnauthorized]), a webhook that is set ([ErrWebhookActive]) and another
// getUpdates caller for the same bot ([ErrConflict]). Everything else is
// retried with a doubling backoff between [Config.MinBackoff] and
// [Config.MaxBackoff].
package poll

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/transport"
)

// Defaults and limits of Config.
const (
	// DefaultTimeout is the long-poll timeout sent to getUpdates.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the largest long-poll timeout; Telegram caps it at 50 s.
	MaxTimeout = 50 * time.Second
	// DefaultLimit is how many updates one getUpdates answer carries at most.
	DefaultLimit = 100
	// MaxLimit is Telegram's upper bound of getUpdates' limit.
	MaxLimit = 100
	// DefaultMinBackoff is the first wait after a failed call or accept.
	DefaultMinBackoff = time.Second
	// DefaultMaxBackoff caps the doubling wait between failures.
	DefaultMaxBackoff = 30 * time.Second
	// MaxBackoffLimit is the largest MinBackoff or MaxBackoff accepted.
	MaxBackoffLimit = 10 * time.Minute
	// ResponseMargin is added to the long-poll timeout to bound the wait for
	// getUpdates' answer, so a healthy long poll never times out on our side.
	ResponseMargin = 15 * time.Second
	// ConfirmTimeout bounds the final getUpdates that confirms the last
	// batch when Run stops.
	ConfirmTimeout = 5 * time.Second
)

var (
	// ErrUnauthorized: Telegram refused the bot token (401) or the bot (404).
	ErrUnauthorized = errors.New("poll: the bot token was refused")
	// ErrWebhookActive: the bot has a webhook, so getUpdates is refused.
	// Delete the webhook (tgrelay webhook delete) or serve the webhook.
	ErrWebhookActive = errors.New("poll: a webhook is set for this bot, so getUpdates is refused; delete the webhook or receive by webhook")
	// ErrConflict: another process called getUpdates for the same bot.
	// Only one poller per bot may run.
	ErrConflict = errors.New("poll: another getUpdates caller is running for this bot; only one poller per bot may run")
)

// Caller makes one Bot API call and returns Telegram's raw result.
// *github.com/tgrelay/tgrelay/botapi.Client implements it. The context it
// is given carries a response timeout for the transport
// ([transport.WithResponseTimeout]) longer than the long poll.
type Caller interface {
	Call(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// Observer receives the poller's events, for logs and metrics: a struct of
// optional funcs, the shape of every tgrelay observer (see "Observers" in
// package intake's doc). Every field is optional; the funcs are called from Run's goroutine (AcceptFunc from the
// accepting goroutines, concurrently) and must be fast.
type Observer struct {
	// BatchFunc sees every batch recorded in full: how many updates it held
	// and the offset that confirms it.
	BatchFunc func(n int, next int64)
	// AcceptErrorFunc sees every update that could not be recorded.
	AcceptErrorFunc func(updateID int64, err error)
	// ErrorFunc sees every failed getUpdates call and the wait before the
	// next one.
	ErrorFunc func(err error, wait time.Duration)
}

// Config configures a Poller. New copies it.
type Config struct {
	// Caller calls getUpdates. Required.
	Caller Caller
	// AcceptFunc records one update's raw JSON durably and returns only
	// then; an error means it was not recorded. Usually the Accept method of
	// an [intake.Runner]. Required. It is called concurrently for the
	// updates of different chats of one batch, and one at a time, in
	// update_id order, for the updates of one chat ([intake.ChatKey]; the
	// updates without a key count as one chat), each call after the
	// previous one returned, so that the runner forwards a chat's updates
	// in order. It must not retain body.
	AcceptFunc func(ctx context.Context, body []byte) (intake.Acceptance, error)
	// Timeout is the long-poll timeout, in whole seconds, 1 s to
	// [MaxTimeout]. Zero means [DefaultTimeout].
	Timeout time.Duration
	// Limit is getUpdates' limit, 1 to [MaxLimit]. Zero means
	// [DefaultLimit].
	Limit int
	// AllowedUpdates is sent as allowed_updates when non-nil.
	AllowedUpdates []string
	// MinBackoff is the first wait after a failure, doubling up to
	// MaxBackoff. 1 ms to [MaxBackoffLimit]; zero means [DefaultMinBackoff].
	MinBackoff time.Duration
	// MaxBackoff caps the wait, MinBackoff to [MaxBackoffLimit]. Zero means
	// [DefaultMaxBackoff] (or MinBackoff when that is larger).
	MaxBackoff time.Duration
	// Observer receives events. The zero value observes nothing.
	Observer Observer
	// Logger receives failures (never update bodies). Nil discards.
	Logger *slog.Logger
}

// Poller long-polls getUpdates into an accept function. Create it with New
// and run it with Run; it is not safe to Run twice at once.
type Poller struct {
	cfg    Config
	log    *slog.Logger
	offset int64 // next offset to ask for; 0 before the first batch
	dirty  bool  // a recorded batch that Telegram has not seen confirmed yet
}

// ConfigError is an invalid [Config] field: Field names it ("Timeout")
// and Err says what is wrong. It is the one config error type of every
// tgrelay package (relay.ConfigError is the same type).
type ConfigError = configerr.Error

func badField(field, format string, args ...any) error {
	return configerr.New("poll", field, format, args...)
}

// Validate reports the first invalid field of c as a *[ConfigError], as
// [New] would. The bounds are checked before Caller and AcceptFunc are
// required. It does no I/O.
func (c Config) Validate() error {
	_, err := c.fill()
	return err
}

// fill returns a copy of c with its defaults, or a *ConfigError.
func (c Config) fill() (Config, error) {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Timeout < time.Second || c.Timeout > MaxTimeout || c.Timeout%time.Second != 0 {
		return c, badField("Timeout", "is %v: want whole seconds from 1s to %v", c.Timeout, MaxTimeout)
	}
	if c.Limit == 0 {
		c.Limit = DefaultLimit
	}
	if c.Limit < 1 || c.Limit > MaxLimit {
		return c, badField("Limit", "is %d: want 1 to %d", c.Limit, MaxLimit)
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MinBackoff < time.Millisecond || c.MinBackoff > MaxBackoffLimit {
		return c, badField("MinBackoff", "is %v: want 1ms to %v", c.MinBackoff, MaxBackoffLimit)
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
	if c.MaxBackoff < c.MinBackoff || c.MaxBackoff > MaxBackoffLimit {
		return c, badField("MaxBackoff", "is %v: want MinBackoff (%v) to %v", c.MaxBackoff, c.MinBackoff, MaxBackoffLimit)
	}
	switch {
	case c.Caller == nil:
		return c, badField("Caller", "is required")
	case c.AcceptFunc == nil:
		return c, badField("AcceptFunc", "is required")
	}
	return c, nil
}

// New returns a Poller for cfg, or a *[ConfigError] naming the invalid
// field.
func New(cfg Config) (*Poller, error) {
	c, err := cfg.fill()
	if err != nil {
		return nil, err
	}
	c.AllowedUpdates = append([]string(nil), cfg.AllowedUpdates...)
	if cfg.AllowedUpdates == nil {
		c.AllowedUpdates = nil
	}
	p := &Poller{cfg: c, log: c.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// Offset returns the offset the next getUpdates will send: one past the last
// update recorded, or 0 before the first batch. It is not safe to call
// concurrently with Run.
func (p *Poller) Offset() int64 { return p.offset }

// Run polls until ctx ends, then confirms the last recorded batch with a
// short getUpdates (bounded by [ConfirmTimeout]) and returns nil. It returns
// early with an error wrapping [ErrUnauthorized], [ErrWebhookActive] or
// [ErrConflict] (and the *botapi.APIError) when Telegram refuses in a way
// waiting cannot heal. Every other failure is retried after a backoff (or
// after the retry_after of Telegram's 429, when that is longer), and
// so is an answer that came before half the long poll's Timeout without
// an update that moves the offset: that is not Telegram's long poll, and
// calling again at once would spin.
func (p *Poller) Run(ctx context.Context) error {
	failures := 0
	for ctx.Err() == nil {
		began, before := time.Now(), p.offset
		batch, err := p.get(ctx, p.cfg.Timeout, p.cfg.Limit)
		if err == nil {
			err = p.record(ctx, batch)
		}
		if err == nil && p.offset == before && time.Since(began) < p.cfg.Timeout/2 {
			// An answer that moved nothing (empty, null, or only elements
			// the offset cannot pass) long before the long poll's timeout
			// is not Telegram's long poll: back off rather than spin.
			err = errNoProgress
		}
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if fatal := classify(err); fatal != nil {
			return fatal
		}
		wait := max(p.backoff(failures), telegramsWait(err))
		failures++
		p.log.Warn("poll: getUpdates failed; retrying", "err", err, "wait", wait)
		if f := p.cfg.Observer.ErrorFunc; f != nil {
			f(err, wait)
		}
		_ = backoff.Sleep(ctx, wait) // an ended ctx ends the loop
	}
	p.confirm()
	return nil
}

// telegramsWait is the wait Telegram named in a 429 answer to
// getUpdates (its retry_after), at most MaxBackoffLimit; zero for any
// other error. Polling again sooner would only meet the same 429.
func telegramsWait(err error) time.Duration {
	var ae *botapi.APIError
	if !errors.As(err, &ae) || ae.NotJSON || ae.Code != 429 {
		return 0
	}
	return min(ae.RetryAfter, MaxBackoffLimit)
}

// errNoProgress: getUpdates answered early with nothing that moves the
// offset.
var errNoProgress = errors.New("poll: getUpdates answered early without an update that moves the offset")

// backoff is MinBackoff doubled failures times, capped at MaxBackoff.
func (p *Poller) backoff(failures int) time.Duration {
	return backoff.Capped{Base: p.cfg.MinBackoff, Max: p.cfg.MaxBackoff}.Delay(failures + 1)
}

type getParams struct {
	Offset         int64    `json:"offset,omitempty"`
	Limit          int      `json:"limit"`
	Timeout        int      `json:"timeout"`
	AllowedUpdates []string `json:"allowed_updates,omitempty"`
}

// get calls getUpdates once and splits the answer into its raw elements.
func (p *Poller) get(ctx context.Context, timeout time.Duration, limit int) ([]json.RawMessage, error) {
	wait := timeout + ResponseMargin
	cctx, cancel := context.WithTimeout(transport.WithResponseTimeout(ctx, wait), wait+ResponseMargin)
	defer cancel()
	res, err := p.cfg.Caller.Call(cctx, "getUpdates", getParams{
		Offset: p.offset, Limit: limit, Timeout: int(timeout / time.Second), AllowedUpdates: p.cfg.AllowedUpdates,
	})
	if err != nil {
		return nil, err
	}
	var batch []json.RawMessage // each element keeps Telegram's bytes
	if err := json.Unmarshal(res, &batch); err != nil {
		return nil, fmt.Errorf("poll: getUpdates result is not a JSON array: %w", err)
	}
	if limit > 0 && len(batch) > MaxLimit {
		return nil, fmt.Errorf("poll: getUpdates returned %d updates, more than %d", len(batch), MaxLimit)
	}
	return batch, nil
}

// record accepts every element of batch and advances the offset past the
// batch only when all of them were recorded.
//
// A chat's updates are accepted one at a time, in update_id order, each
// after the previous one returned: the runner schedules (and forwards) a
// chat's updates in the order they were accepted, so concurrent accepts of
// one chat could put a later update first. The chats of a batch are
// accepted concurrently, so their adds still share group commits. When an
// update cannot be recorded, the later updates of its chat are not tried
// (recording them would let them run before it); the batch comes back.
func (p *Poller) record(ctx context.Context, batch []json.RawMessage) error {
	if len(batch) == 0 {
		return nil
	}
	next := p.offset
	ids := make([]int64, len(batch))
	chats := make(map[string][]int) // chat key → indexes into batch
	for i, raw := range batch {
		// The update_id is the one the accept function records
		// (intake.ParseUpdate: the exact key "update_id", held once in
		// any letter case, a non-negative integer literal), not
		// encoding/json's case-insensitive match: a folded key such as
		// "Update_ID" must not move the offset past updates Telegram has
		// not handed out yet. An element intake refuses moves it nowhere.
		ids[i] = -1
		if id, err := intake.ParseUpdate(raw); err == nil {
			ids[i] = id
			if id < math.MaxInt64 {
				next = max(next, id+1)
			}
		}
		// Updates without a chat key (no chat, or a key too long to
		// keep) share the key "", so they too are accepted in order.
		k := intake.ChatKey(raw)
		chats[k] = append(chats[k], i)
	}
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	for _, idx := range chats {
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
		wg.Go(func() {
			for _, i := range idx {
				if err := p.accept(ctx, batch[i], ids[i]); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("poll: record batch of %d (offset %d kept): %w", len(batch), p.offset, err)
	}
	if next > p.offset {
		p.offset = next
		p.dirty = true
	}
	if f := p.cfg.Observer.BatchFunc; f != nil {
		f(len(batch), p.offset)
	}
	return nil
}

// accept records one element of a batch, reporting a failure.
func (p *Poller) accept(ctx context.Context, raw json.RawMessage, id int64) error {
	a, err := p.cfg.AcceptFunc(ctx, raw)
	if err != nil {
		if f := p.cfg.Observer.AcceptErrorFunc; f != nil {
			f(id, err)
		}
		return err
	}
	if a == intake.Invalid {
		// Not an update: nothing can record it, and holding the offset
		// would only bring it back forever.
		p.log.Warn("poll: getUpdates returned an element that is not an update; skipped", "update_id", id)
	}
	return nil
}

// confirm tells Telegram, with a call that does not wait, that the last
// recorded batch can be forgotten. An update it returns is not recorded and
// stays unconfirmed, so it comes back to the next poller.
func (p *Poller) confirm() {
	if !p.dirty {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ConfirmTimeout)
	defer cancel()
	cctx := transport.WithResponseTimeout(ctx, ConfirmTimeout)
	if _, err := p.cfg.Caller.Call(cctx, "getUpdates", getParams{Offset: p.offset, Limit: 1}); err != nil {
		p.log.Info("poll: could not confirm the last batch; it will come back as duplicates", "err", err)
		return
	}
	p.dirty = false
}

// classify returns the error Run ends with for a refusal waiting cannot
// heal, or nil.
func classify(err error) error {
	var ae *botapi.APIError
	if !errors.As(err, &ae) || ae.NotJSON {
		return nil
	}
	switch {
	case ae.Code == 401 || ae.Code == 404:
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	case ae.Code == 409 && strings.Contains(strings.ToLower(ae.Description), "webhook"):
		return fmt.Errorf("%w: %w", ErrWebhookActive, err)
	case ae.Code == 409:
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return nil
}
