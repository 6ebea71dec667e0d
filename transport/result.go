package transport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/tgrelay/tgrelay/wire"
)

// Result is the end of one [Transport.RoundTrip], as a func installed with
// [WithResultFunc] sees it.
type Result struct {
	// Method is the Bot API method of a "…/bot<token>/<method>" URL path,
	// such as "sendMessage", and empty for any other path: a file
	// download ("/file/bot<token>/<path>"), a path that ends in the token
	// (a call made with no method), a request that is no Bot API call.
	// The URL itself (which holds the bot token) is never passed.
	Method string
	// Status is the answer's HTTP status; zero when RoundTrip failed.
	Status int
	// Header is the answer's header; nil when RoundTrip failed.
	Header http.Header
	// Body is the answer's whole body, already in memory; nil when
	// RoundTrip failed. It is shared: do not modify or retain it.
	Body []byte
	// Err is RoundTrip's error: a [*NotDispatchedError], an
	// [*OutcomeUnknownError], or nil with an answer.
	Err error
}

// Unknown reports whether the result leaves the outcome unknown: the
// request failed after its first byte, or the answer is tgrelay's gateway
// saying it does not know ([wire.HeaderOutcome] [wire.OutcomeUnknown]: the gateway does not know
// whether Telegram received the request, so the answer is not Telegram's
// word).
func (r Result) Unknown() bool {
	if r.Err != nil {
		_, nd := r.Err.(*NotDispatchedError)
		return !nd
	}
	return wire.OutcomeOf(r.Header) == wire.OutcomeUnknown
}

type resultFuncKey struct{}

// WithResultFunc returns a context that makes [Transport.RoundTrip] call f
// with the result of every request made with it (or a context derived from
// it), synchronously, before RoundTrip returns. A library that hides the
// transport's errors or Telegram's answer behind its own types cannot hide
// them from f: tgrelay's intake runner installs one for each attempt, so
// its retry policy knows when a send's outcome was unknown and what
// Telegram answered, whatever the library returned. f must be safe for
// concurrent use when requests are. A func already in ctx is called too,
// before f. A nil f removes every func from the returned context, so
// requests made with it report to none.
func WithResultFunc(ctx context.Context, f func(Result)) context.Context {
	if f == nil {
		return context.WithValue(ctx, resultFuncKey{}, f)
	}
	if prev := resultFuncFrom(ctx); prev != nil {
		next := f
		f = func(r Result) { prev(r); next(r) }
	}
	return context.WithValue(ctx, resultFuncKey{}, f)
}

// ResultFuncFrom returns the func [WithResultFunc] put in ctx (the funcs
// installed there, chained in the order they were added), or nil when
// there is none or a nil func removed them. It is the func
// [Transport.RoundTrip] calls; another RoundTripper may call it to report
// a result of its own. Nothing else in this module calls it: tgrelay's
// gateway passes its caller's context on to the Transport beneath it, so
// funcs there see the gateway's exchanges with Telegram, not the answers
// the gateway makes itself (a replayed answer, its own unknown).
func ResultFuncFrom(ctx context.Context) func(Result) {
	return resultFuncFrom(ctx)
}

func resultFuncFrom(ctx context.Context) func(Result) {
	f, _ := ctx.Value(resultFuncKey{}).(func(Result))
	return f
}

// report calls f with the result and returns resp with its body readable
// again.
func report(f func(Result), req *http.Request, resp *http.Response, err error) *http.Response {
	r := Result{Err: err}
	if req.URL != nil {
		r.Method = methodOf(req.URL.Path)
	}
	if resp != nil {
		body, _ := io.ReadAll(resp.Body) // in memory: cannot fail
		resp.Body = io.NopCloser(bytes.NewReader(body))
		r.Status, r.Header, r.Body = resp.StatusCode, resp.Header, body
	}
	f(r)
	return resp
}

// methodOf returns the method of a "…/bot<token>/<method>" URL path, a
// trailing slash allowed, or "" for any other path ([wire.BotMethod]).
func methodOf(p string) string {
	method, _ := wire.BotMethod(strings.TrimRight(p, "/"))
	return method
}
