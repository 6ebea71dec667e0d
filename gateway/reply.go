package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/wire"
)

// Reply performs one webhook reply, a Bot API call an app returned in its
// answer to an update forward, on behalf of id: fenced and journaled as a
// call with that identity. params is the call's JSON object without
// "method". It reports the status the call was answered with, its outcome
// (the [Outcome] values; "answered" for Telegram's own answer) and whether
// it was replayed. Its outcome is journaled before it returns, since the
// update settles on its answer. It implements forward.Replier.
func (g *Gateway) Reply(ctx context.Context, id intake.Identity, method string, params []byte) (status int, outcome string, replayed bool) {
	start := g.cfg.Test.Now()
	ctx, span := g.startReply(ctx)
	ctx, l, release := g.callContext(ctx, time.Now())
	defer release()
	var a answer
	if !botapi.ValidMethod(method) {
		a = telegramError(http.StatusNotFound, wire.OutcomeRefused, "Not Found", 0)
	} else if g.refusedMethod(method) != "" {
		a = telegramError(http.StatusConflict, wire.OutcomeRefused, "Conflict: tgrelay receives this bot's updates", 0)
	} else {
		c := &call{method: method, httpMethod: http.MethodPost, upstream: g.cfg.APIRoot + "/bot" + g.cfg.Token + "/" + method,
			contentType: "application/json", prefix: params, complete: true, contentLength: int64(len(params)),
			durableOutcome: true, leash: l}
		a = g.handle(ctx, &id, c)
	}
	if a.stream != nil {
		a.stream.Close()
	}
	shown := g.shownMethod(method)
	g.observe(shown, a, true, true, start, false)
	endCall(span, "reply", shown, a, true)
	return a.status, string(a.outcome), a.replayed
}

// refusedMethod returns the intake method name method stands for, when the
// gateway refuses it, or "".
func (g *Gateway) refusedMethod(method string) string {
	if !g.cfg.OwnsIntake {
		return ""
	}
	for _, m := range intakeMethods {
		if equalFold(method, m) {
			return m
		}
	}
	return ""
}
