package gateway

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/wire"
)

// routePath maps the path of a call made under an announced API root onto
// Telegram's own form (/bot<token>/<method> or /file/bot<token>/<path>),
// whichever way the app's library joined the root and the call:
//
//	root + "/bot<token>/<method>"   …/bot/bot<token>/<method>   (grammY, aiogram, node-telegram-bot-api, go-telegram/bot, telego)
//	root + "<token>/<method>"       …/bot<token>/<method>       (python-telegram-bot's base_url)
//	URL("./bot<token>/<method>", root)  …/bot<token>/<method>   (Telegraf: the root's last segment, "bot", is dropped)
//	root + "/file/bot<token>/<path>"    …/bot/file/bot<token>/<path>
//
// Runs of slashes count as one (a root given a trailing slash by hand), and
// …/bot/<token>/<method> (python-telegram-bot's base_url with a trailing
// slash) is read as /bot<token>/<method>. A path of another shape is
// returned as it is, to be refused.
func routePath(p string) string {
	if strings.Contains(p, "//") {
		var b strings.Builder
		for i := 0; i < len(p); i++ {
			if p[i] == '/' && i > 0 && p[i-1] == '/' {
				continue
			}
			b.WriteByte(p[i])
		}
		p = b.String()
	}
	rest, ok := strings.CutPrefix(p, wire.RootSuffix+"/")
	if !ok {
		return p
	}
	if strings.HasPrefix(rest, "bot") || strings.HasPrefix(rest, "file/") {
		return "/" + rest
	}
	return wire.RootSuffix + rest
}

// intakeMethods would take the bot's updates from the relay.
var intakeMethods = []string{"getUpdates", "setWebhook", "deleteWebhook"}

// ServeHTTP serves the Bot API for an app, as Telegram does:
//
//	/bot<token>/<method>               a call (GET or POST; JSON, form or multipart)
//	/file/bot<token>/<path>            a file download
//	/a/<update>/<attempt>/<claim>/…    either, on behalf of that attempt
//
// A call under the announced root, which ends in [wire.RootSuffix], is read
// as one of these whichever way the app's library joined root and call
// (see "The announced API root" in the package doc).
//
// A call carries an attempt identity through the per-attempt prefix or the
// three headers [wire.HeaderUpdateID], [wire.HeaderAttempt] and [wire.HeaderClaimID] (both
// at once must agree). The token must be Config.Token (else 401, as
// Telegram answers a wrong token). With Config.OwnsIntake, getUpdates,
// setWebhook and deleteWebhook are refused (409). What the app gets is
// described in the package doc.
//
// The request body is read as it is sent on: at most
// Config.MaxBufferedBody of it is held (a larger multipart upload streams
// through; a larger JSON or form body is answered 413), within the
// Config.MaxBufferedTotal that all calls share. The server's own
// read timeout bounds a slow app.
//
// Every answer carries [HeaderCallTimeout]. The handler sets its
// connection's write deadline to [Bounds].WriteTimeout from the request's
// arrival, when the ResponseWriter allows it (http.ResponseController), so
// a server whose own write timeout is shorter does not cut the answer. (The
// server's read timeout bounds reading the request only: net/http lifts the
// read deadline once the body is read.) An app that closes its connection
// while its call has not left stops the call: it is not sent. Once it left,
// the call goes on, and its outcome is journaled; the answer the app did
// not get is reported to the Observer as undelivered.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start, arrival := g.cfg.Test.Now(), time.Now()
	rc := http.NewResponseController(w)
	deadline := arrival.Add(g.bounds.WriteTimeout)
	_ = rc.SetWriteDeadline(deadline) // not supported: the server's own WriteTimeout applies
	app, span := g.startCall(r)       // r's context, with the call's span
	ctx, l, release := g.callContext(app, arrival)
	defer release()
	a, method, fenced := g.serve(ctx, l, r)
	w.Header().Set(HeaderCallTimeout, g.bounds.callTimeoutValue())
	delivered := g.write(w, rc, r.Context(), a)
	shown := g.shownMethod(method)
	g.observe(shown, a, fenced, false, start, !delivered)
	endCall(span, "gateway", shown, a, fenced)
}

// shownMethod is method as the Observer and the traces show it: "invalid"
// for what is no method name, and for one that holds the token (its
// secret half is a valid method name by its characters).
func (g *Gateway) shownMethod(method string) string { return botapi.ShownMethod(method, g.redact) }

// observe reports a to the Observer; method is as shownMethod shows it.
func (g *Gateway) observe(method string, a answer, fenced, webhookReply bool, start time.Time, undelivered bool) {
	f := g.cfg.Observer.CallFunc
	if f == nil {
		return
	}
	f(CallEvent{Method: method, Outcome: a.outcome, Status: a.status, Fenced: fenced, WebhookReply: webhookReply,
		Replayed: a.replayed, Telegram429: a.tg429, Tries: a.tries, Duration: g.cfg.Test.Now().Sub(start), Undelivered: undelivered})
}

func equalFold(a, b string) bool { return strings.EqualFold(a, b) }

// write writes a and reports whether the app got it, as far as the server
// can tell: its connection was still open (app, the request's context, had
// not ended) when the final flush began, and every write and that flush
// succeeded. The app is looked at before the flush, not after: the end of
// the answer leaves in that flush, so an app gone by then did not get it
// all, while one that closes its connection after it has most likely read
// it (an HTTP client closes a connection it will not keep as soon as it has
// read the answer).
func (g *Gateway) write(w http.ResponseWriter, rc *http.ResponseController, app context.Context, a answer) bool {
	for k, vs := range a.header {
		w.Header()[k] = vs
	}
	if a.stream == nil && bodyAllowed(a.status) {
		// A buffered answer says its length: the flush below then sends
		// the whole response in one write, where an unsized one would be
		// chunked and need a second write for its last chunk.
		w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	}
	w.WriteHeader(a.status)
	_, err := w.Write(a.body)
	if errors.Is(err, http.ErrBodyNotAllowed) { // HEAD: the head is the answer
		err = nil
	}
	if a.stream != nil {
		if err == nil {
			_, err = io.Copy(w, a.stream)
		}
		a.stream.Close()
	}
	gone := app.Err() != nil
	if err == nil {
		if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
			err = ferr
		}
	}
	return !gone && err == nil
}

// bodyAllowed reports whether a response of status may carry a body (and
// so a Content-Length).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

func notFound() answer {
	return telegramError(http.StatusNotFound, wire.OutcomeRefused, "Not Found", 0)
}

// serve answers r in ctx, the call's context (see callContext), stopped
// through l when the app goes.
func (g *Gateway) serve(ctx context.Context, l *leash, r *http.Request) (a answer, method string, fenced bool) {
	path := r.URL.Path
	var id *intake.Identity
	if strings.HasPrefix(path, wire.AttemptPrefix) {
		u, a, c, rest, ok := wire.CutAttemptPath(path)
		if !ok {
			return notFound(), "", false
		}
		pid, err := parseIdentity(u, a, c)
		if err != nil {
			return telegramError(http.StatusBadRequest, wire.OutcomeRefused, "Bad Request: tgrelay: "+err.Error(), 0), "", true
		}
		id, path = &pid, rest
	}
	path = routePath(path)
	if hid, present, err := identityFromHeader(r.Header); present {
		if err != nil {
			return telegramError(http.StatusBadRequest, wire.OutcomeRefused, "Bad Request: tgrelay: "+err.Error(), 0), "", true
		}
		if id != nil && *id != hid {
			return telegramError(http.StatusBadRequest, wire.OutcomeRefused,
				"Bad Request: tgrelay: the identity headers and the per-attempt API root name different attempts", 0), "", true
		}
		id = &hid
	}
	fenced = id != nil

	file := false
	rest, ok := strings.CutPrefix(path, "/bot")
	if !ok {
		if rest, ok = strings.CutPrefix(path, "/file/bot"); !ok {
			return notFound(), "", fenced
		}
		file = true
	}
	token, tail, ok := strings.Cut(rest, "/")
	if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(g.cfg.Token)) != 1 {
		return telegramError(http.StatusUnauthorized, wire.OutcomeRefused, "Unauthorized", 0), "", fenced
	}
	c := &call{httpMethod: r.Method, query: queryParams(r.URL.RawQuery), contentType: r.Header.Get("Content-Type"), contentLength: r.ContentLength, leash: l}
	if file {
		if tail == "" || r.Method != http.MethodGet && r.Method != http.MethodHead {
			return notFound(), "file", fenced
		}
		fp, ok := filePath(tail)
		if !ok {
			return notFound(), "file", fenced
		}
		c.method, c.streamAnswer, c.complete = "file", true, true
		c.upstream = g.cfg.APIRoot + "/file/bot" + g.cfg.Token + "/" + fp
		if r.URL.RawQuery != "" {
			c.upstream += "?" + r.URL.RawQuery
		}
		return g.handle(ctx, id, c), "file", fenced
	}
	method = tail
	if !botapi.ValidMethod(method) {
		return notFound(), method, fenced
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return telegramError(http.StatusMethodNotAllowed, wire.OutcomeRefused, "Method Not Allowed: tgrelay: use GET or POST", 0), method, fenced
	}
	if m := g.refusedMethod(method); m != "" {
		return telegramError(http.StatusConflict, wire.OutcomeRefused, fmt.Sprintf(
			"Conflict: tgrelay receives this bot's updates, so %s is refused here (it would take them from the relay)", m), 0), method, fenced
	}
	c.method = method
	c.upstream = g.cfg.APIRoot + "/bot" + g.cfg.Token + "/" + method
	if r.URL.RawQuery != "" {
		c.upstream += "?" + r.URL.RawQuery
	}
	defer g.releaseBody(c)
	if err := g.readBody(ctx, r.Body, c); err != nil {
		return *err, method, fenced
	}
	return g.handle(ctx, id, c), method, fenced
}

// filePath returns the file path p of a download (as decoded from the
// request) escaped for the upstream URL, segment by segment, so that an
// escaped "?" or "#" stays part of the path. ok is false when a
// segment is "." or "..": a server that resolves them (as nginx does in
// front of Telegram) would read such a path as another URL, even a Bot API
// method that the gateway would then send unjournaled.
func filePath(p string) (escaped string, ok bool) {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s == "." || s == ".." {
			return "", false
		}
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/"), true
}

// readBody reads up to MaxBufferedBody+1 bytes of body into c.prefix; the
// rest, if any, is left to stream (multipart only). Before each read it
// takes what the read may hold from the gateway's MaxBufferedTotal (the
// whole body at once when its length is known), waiting in ctx for it;
// the caller gives it back with releaseBody once the call is answered.
func (g *Gateway) readBody(ctx context.Context, body io.Reader, c *call) *answer {
	if body == nil {
		c.complete = true
		return nil
	}
	max := g.cfg.MaxBufferedBody
	var buf []byte
	for int64(len(buf)) <= max {
		// One byte past max tells a larger body; it is not counted.
		step := max + 1 - int64(len(buf))
		if c.contentLength >= int64(len(buf)) {
			step = min(step, c.contentLength-int64(len(buf))+1)
		} else {
			step = min(step, bodyStep(len(buf)))
		}
		share := min(step, max-c.held)
		if err := g.bodies.take(ctx, share); err != nil {
			a := telegramError(StatusNotDispatched, wire.OutcomeNotDispatched, fmt.Sprintf(
				"Service Unavailable: tgrelay: the gateway holds its limit of %d bytes of request bodies, and none was freed for this call in time; nothing was sent", g.cfg.MaxBufferedTotal), 1)
			return &a
		}
		c.held += share
		if cap(buf)-len(buf) < int(step) {
			buf = append(make([]byte, 0, len(buf)+int(step)), buf...)
		}
		n, err := io.ReadFull(body, buf[len(buf):len(buf)+int(step)])
		buf = buf[:len(buf)+n]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			c.prefix, c.complete = buf, true
			return nil
		}
		if err != nil {
			a := telegramError(http.StatusBadRequest, wire.OutcomeRefused, "Bad Request: tgrelay: the request body could not be read", 0)
			return &a
		}
	}
	c.prefix = buf
	mt, _, _ := mime.ParseMediaType(c.contentType)
	if mt != "multipart/form-data" {
		a := telegramError(http.StatusRequestEntityTooLarge, wire.OutcomeRefused, fmt.Sprintf(
			"Request Entity Too Large: tgrelay: a %s body is limited to %d bytes; larger uploads must be multipart", mt, max), 0)
		return &a
	}
	c.rest = &countingReader{r: body}
	return nil
}

// bodyStep is the next read of a body of unknown length, of which n bytes
// were read: at least 64 KiB, then doubling what was read.
func bodyStep(n int) int64 { return int64(max(n, 64<<10)) }

// releaseBody gives back the share of MaxBufferedTotal that c's body took.
func (g *Gateway) releaseBody(c *call) {
	g.bodies.give(c.held)
	c.held = 0
}

// parseIdentity reads an attempt identity from its three textual parts.
func parseIdentity(update, attempt, claim string) (intake.Identity, error) {
	u, n, c, err := wire.ParseIdentity(update, attempt, claim)
	if err != nil {
		return intake.Identity{}, err
	}
	return intake.Identity{UpdateID: u, Attempt: n, ClaimID: c}, nil
}

// identityFromHeader reads the three identity headers; present is false
// when none is set.
func identityFromHeader(h http.Header) (id intake.Identity, present bool, err error) {
	u, a, c := h.Get(wire.HeaderUpdateID), h.Get(wire.HeaderAttempt), h.Get(wire.HeaderClaimID)
	if u == "" && a == "" && c == "" {
		return intake.Identity{}, false, nil
	}
	if u == "" || a == "" || c == "" {
		return intake.Identity{}, true, fmt.Errorf("an attempt identity needs all three headers %s, %s and %s", wire.HeaderUpdateID, wire.HeaderAttempt, wire.HeaderClaimID)
	}
	id, err = parseIdentity(u, a, c)
	return id, true, err
}
