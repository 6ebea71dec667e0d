package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/throttle"
)

// HeaderCallTimeout is set on every answer of [Gateway.ServeHTTP]: the
// longest the gateway takes to answer a call, in whole seconds from the
// arrival of its request ([Bounds].Answer, rounded up). An app's HTTP
// timeout toward the gateway should exceed it; a shorter one may give up
// on a call that is still sent (see the package doc, "Time bounds").
const HeaderCallTimeout = "Tgrelay-Call-Timeout"

// Bounds are the time limits of one call through a [Gateway], derived
// once from its Config (see the package doc, "Time bounds"). A server that
// serves the gateway must not cut a call sooner: its write timeout must be
// at least WriteTimeout.
type Bounds struct {
	// MaxWait is the longest a call waits for its turn, Telegram's 429
	// pauses and retries included: the limiter's Config.MaxWait (the
	// larger one when Transport and StreamTransport have different
	// limiters); zero when the transports are not [throttle.Transport]s.
	MaxWait time.Duration
	// ResponseTimeout is the longest Telegram may take to answer a call
	// once it has its turn (Config.ResponseTimeout).
	ResponseTimeout time.Duration
	// Answer is the longest the gateway takes to answer a call from the
	// arrival of its request: MaxWait, then ResponseTimeout, then
	// OutcomeTimeout for an outcome journaled before the answer.
	Answer time.Duration
	// WriteTimeout is Answer plus [AnswerWriteMargin] to write the answer:
	// the least write timeout of a server that serves the gateway, and the
	// write deadline [Gateway.ServeHTTP] sets on its connection itself.
	WriteTimeout time.Duration
}

// Margins of [Bounds].
const (
	// OutcomeTimeout bounds the journaling of one outcome, which may
	// precede the answer (a not-dispatched outcome, a webhook reply, or
	// Config.MaxPendingOutcomes outcomes in flight already).
	OutcomeTimeout = outcomeBound
	// AnswerWriteMargin is the time [Bounds].WriteTimeout leaves to write an
	// answer once it is ready.
	AnswerWriteMargin = 5 * time.Second
)

// Bounds returns the gateway's time limits.
func (g *Gateway) Bounds() Bounds { return g.bounds }

func boundsOf(c Config) Bounds {
	b := Bounds{MaxWait: max(maxWaitOf(c.Transport), maxWaitOf(c.StreamTransport)), ResponseTimeout: c.ResponseTimeout}
	b.Answer = b.MaxWait + b.ResponseTimeout + OutcomeTimeout
	b.WriteTimeout = b.Answer + AnswerWriteMargin
	return b
}

// maxWaitOf returns the MaxWait of rt's limiter, zero when rt is not a
// throttle.Transport.
func maxWaitOf(rt http.RoundTripper) time.Duration {
	if t, ok := rt.(interface{ Limiter() *throttle.Limiter }); ok && t.Limiter() != nil {
		return t.Limiter().Config().MaxWait
	}
	return 0
}

// callTimeoutValue is HeaderCallTimeout's value: Answer in whole seconds,
// rounded up.
func (b Bounds) callTimeoutValue() string {
	return strconv.FormatInt(int64((b.Answer+time.Second-1)/time.Second), 10)
}

// errAppGone is why a call that had not left is stopped when its app went.
var errAppGone = errors.New("gateway: the app closed its connection before the call was sent")

// leash ties a call to its app until the call leaves: while the call waits
// (for its turn, for a try after one that never left), the app's going
// (its context ending: for an HTTP call, its connection closed) stops it,
// and it is never sent. Once it leaves, the app's going no longer stops it:
// Telegram's answer is read and journaled as if the app were there, so a
// later attempt replays it rather than sending again.
type leash struct {
	mu      sync.Mutex
	gone    bool
	leaving bool
	cancel  context.CancelCauseFunc
}

func (l *leash) appGone() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone = true
	if !l.leaving {
		l.cancel(errAppGone)
	}
}

// leave marks the call as leaving; it fails when the app has gone.
func (l *leash) leave() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return errAppGone
	}
	l.leaving = true
	return nil
}

// back marks a call whose try did not leave as waiting again.
func (l *leash) back() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leaving = false
	if l.gone {
		l.cancel(errAppGone)
	}
}

// callContext returns the context a call runs in, from the context of its
// app (app) and the moment its request arrived: it ends at the call's hard
// bound (arrival + MaxWait + ResponseTimeout), or when the app goes while
// the call has not left (see leash); the limiter refuses the call's turn
// after arrival + MaxWait, with a 429. release must be called once the
// answer is written (or its stream closed).
func (g *Gateway) callContext(app context.Context, arrival time.Time) (ctx context.Context, l *leash, release func()) {
	b := g.bounds
	ctx, cancelDeadline := context.WithDeadline(context.WithoutCancel(app), arrival.Add(b.MaxWait+b.ResponseTimeout))
	ctx, cancel := context.WithCancelCause(ctx)
	if b.MaxWait > 0 {
		ctx = throttle.WithWaitDeadline(ctx, arrival.Add(b.MaxWait))
	}
	l = &leash{cancel: cancel}
	stop := context.AfterFunc(app, l.appGone)
	return ctx, l, func() {
		stop()
		cancel(nil)
		cancelDeadline()
	}
}
