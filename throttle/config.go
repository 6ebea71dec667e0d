package throttle

import (
	"time"

	"github.com/tgrelay/tgrelay/internal/configerr"
)

// Defaults and bounds of [Config]. The rate defaults are Telegram's
// published limits (Bot FAQ, "My bot is hitting limits, how do I avoid
// this?").
const (
	// DefaultBotCount sends per DefaultBotPer across all chats: "about 30
	// messages per second" per bot.
	DefaultBotCount = 30
	// DefaultBotPer is the window of the bot-wide limit.
	DefaultBotPer = time.Second
	// DefaultPaidCount sends per DefaultPaidPer for calls made with
	// allow_paid_broadcast (Telegram: up to 1000 messages per second, for
	// a fee in Stars per message).
	DefaultPaidCount = 1000
	// DefaultPaidPer is the window of the paid-broadcast limit.
	DefaultPaidPer = time.Second
	// DefaultChatCount sends per DefaultChatPer in one chat: one message
	// per second on average, with a short burst of up to five (Telegram:
	// "avoid sending more than one message per second; we may allow short
	// bursts that go over this limit"). It is the rule telegramtest keeps
	// (5 in any 5 s): a rule of the same average over another window does
	// not stay inside it (3 in any 3 s puts 6 sends into some 5 s windows),
	// and each refusal would pause the whole bot for its retry_after.
	DefaultChatCount = 5
	// DefaultChatPer is the window of the per-chat limit.
	DefaultChatPer = 5 * time.Second
	// DefaultGroupCount sends per DefaultGroupPer in one group, supergroup
	// or channel (chat id below zero), on top of the per-chat limit:
	// "no more than 20 messages per minute in the same group".
	DefaultGroupCount = 20
	// DefaultGroupPer is the window of the per-group limit.
	DefaultGroupPer = time.Minute

	// DefaultMaxWait bounds how long a call waits for its turn, 429 pauses
	// and retries included, before it is refused with a retry_after. It is
	// the group window (a minute): a group that sent its 20 messages in the
	// first seconds of a minute waits for the rest of it, and a shorter
	// bound would answer an ordinary group flood with 429s. The gateway
	// answers a call within this wait plus Telegram's answer time (its
	// Bounds, stated to the app in Tgrelay-Call-Timeout); an app's HTTP
	// timeout toward the gateway should exceed that.
	DefaultMaxWait = time.Minute
	// MaxMaxWait bounds Config.MaxWait.
	MaxMaxWait = 10 * time.Minute
	// DefaultMaxQueue bounds the calls waiting at once, across all chats.
	DefaultMaxQueue = 10000
	// MaxMaxQueue bounds Config.MaxQueue.
	MaxMaxQueue = 1 << 20
	// DefaultMaxHold bounds how long a granted call may stay unanswered
	// before the limiter counts it as sent at that moment (a [Permit] that
	// is never finished cannot block its chat forever).
	DefaultMaxHold = 2 * time.Minute
	// MaxLimitPer bounds the window of every [Limit].
	MaxLimitPer = 24 * time.Hour
	// MaxLimitCount bounds the count of every [Limit].
	MaxLimitCount = 1 << 20
)

// Limit allows Count sends in any window of length Per, as Telegram
// counts: a sliding window, not a refilling bucket, so that a send the
// limiter allows is one Telegram allows. The zero value means the
// default of the field; a negative Count turns the limit off.
type Limit struct {
	Count int
	Per   time.Duration
}

// interval is the average spacing the limit allows (Per / Count).
func (l Limit) interval() time.Duration {
	if l.Count <= 0 {
		return 0
	}
	return l.Per / time.Duration(l.Count)
}

// Config configures a [Limiter]. The zero value is Telegram's limits with
// the default bounds. [New] copies it.
type Config struct {
	// Bot limits counted sends across all chats. Zero means
	// DefaultBotCount per DefaultBotPer.
	Bot Limit
	// Paid replaces Bot for calls made with allow_paid_broadcast: true
	// (the opt-in, paid higher rate). Paid calls count against Paid only,
	// not Bot. Zero means DefaultPaidCount per DefaultPaidPer.
	Paid Limit
	// Chat limits counted sends to one chat. Zero means DefaultChatCount
	// per DefaultChatPer (1/s with a burst of 5).
	Chat Limit
	// Group limits counted sends to one group, supergroup or channel (a
	// chat id below zero), in addition to Chat. Zero means
	// DefaultGroupCount per DefaultGroupPer.
	Group Limit

	// MaxWait bounds how long one call may wait for its turn, 429 pauses
	// and retries included. A call that cannot be granted within it is
	// refused with a [*WaitError] carrying a retry_after. Zero means
	// DefaultMaxWait; at most MaxMaxWait. A sooner deadline set with
	// [WithWaitDeadline] replaces it for one call; a context deadline that
	// comes sooner ends the wait sooner, with the context's error.
	MaxWait time.Duration
	// MaxQueue bounds the calls waiting at once, across all chats; a call
	// beyond it is refused at once with a [*WaitError] (ReasonQueueFull).
	// Zero means DefaultMaxQueue; at most MaxMaxQueue.
	MaxQueue int
	// MaxHold bounds how long a granted [Permit] may stay unfinished; after
	// it the limiter counts the call as sent then. Zero means
	// DefaultMaxHold.
	MaxHold time.Duration

	// Observer receives the limiter's events, for metrics. The zero value
	// observes nothing.
	Observer Observer

	// Clock is the limiter's time, for tests. Nil means the real clock
	// (which testing/synctest fakes inside a bubble, so most tests need
	// no Clock).
	Clock Clock
}

// Observer receives a [Limiter]'s events. It is a struct of optional
// funcs, the shape of every tgrelay observer (see "Observers" in package
// intake's doc); the zero Observer observes nothing. EventFunc is called
// with no lock held, from the goroutine of the call, concurrently: it must
// return promptly and be safe for concurrent use. A panic in it is not
// recovered.
type Observer struct {
	// EventFunc sees an [Event] for every granted call, every 429 from
	// Telegram and every refusal.
	EventFunc func(Event)
}

// Clock is a source of time and timers. Tests that cannot use
// testing/synctest pass their own in [Config.Clock].
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first (as time.AfterFunc does).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer of a [Clock]; *time.Timer is one.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// ConfigError is an invalid [Config] field: Field names it ("MaxWait",
// "Chat.Count") and Err says what is wrong. It is the one config error
// type of every tgrelay package (relay.ConfigError is the same type).
type ConfigError = configerr.Error

func badField(field, format string, args ...any) error {
	return configerr.New("throttle", field, format, args...)
}

// Validate reports the first invalid field of c as a *[ConfigError], as
// [New] would. It does no I/O.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults validates c and returns a copy with the defaults filled in,
// or a *ConfigError naming the first invalid field.
func (c Config) withDefaults() (Config, error) {
	limits := []struct {
		name  string
		l     *Limit
		count int
		per   time.Duration
	}{
		{"Bot", &c.Bot, DefaultBotCount, DefaultBotPer},
		{"Paid", &c.Paid, DefaultPaidCount, DefaultPaidPer},
		{"Chat", &c.Chat, DefaultChatCount, DefaultChatPer},
		{"Group", &c.Group, DefaultGroupCount, DefaultGroupPer},
	}
	for _, x := range limits {
		switch {
		case *x.l == Limit{}:
			*x.l = Limit{Count: x.count, Per: x.per}
		case x.l.Count < 0:
			*x.l = Limit{Count: -1}
		case x.l.Count == 0 || x.l.Count > MaxLimitCount:
			return c, badField(x.name+".Count", "is %d: want 1 to %d, or negative to turn the limit off", x.l.Count, MaxLimitCount)
		case x.l.Per <= 0 || x.l.Per > MaxLimitPer:
			return c, badField(x.name+".Per", "is %v: want above 0, up to %v", x.l.Per, MaxLimitPer)
		}
	}
	switch {
	case c.MaxWait < 0 || c.MaxWait > MaxMaxWait:
		return c, badField("MaxWait", "is %v: want 0 to %v", c.MaxWait, MaxMaxWait)
	case c.MaxWait == 0:
		c.MaxWait = DefaultMaxWait
	}
	switch {
	case c.MaxQueue < 0 || c.MaxQueue > MaxMaxQueue:
		return c, badField("MaxQueue", "is %d: want 0 to %d", c.MaxQueue, MaxMaxQueue)
	case c.MaxQueue == 0:
		c.MaxQueue = DefaultMaxQueue
	}
	switch {
	case c.MaxHold < 0 || c.MaxHold > MaxLimitPer:
		return c, badField("MaxHold", "is %v: want 0 to %v", c.MaxHold, MaxLimitPer)
	case c.MaxHold == 0:
		c.MaxHold = DefaultMaxHold
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c, nil
}
