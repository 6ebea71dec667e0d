package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/tgrelay/tgrelay/wire"
)

// At most one answer per query.
//
// Telegram accepts one answer to a callback, inline, pre-checkout or
// shipping query; a second is refused ("query is too old and response
// timeout expired or query ID is invalid"). The relay may answer a query
// itself (a safe decline near its deadline, see package relay), and the
// app may answer it later, or a retry of the update may answer it again
// with other words. So the calls that answer a query are journaled keyed
// by the query they answer, not by their parameters: the first answer of
// an update's query is sent, and every later one, from any attempt and
// with any parameters, gets the first's journaled answer
// (Tgrelay-Replayed: true). Two answers to the same query in flight at
// once take turns, so the second reads the first's outcome rather than a
// pending entry.

// queryAnswer is a method that answers a query, and the parameter that
// names the query.
type queryAnswer struct{ method, param string }

// queryAnswers are the methods that answer queries, by lower-case name.
var queryAnswers = map[string]queryAnswer{
	"answercallbackquery":    {"answerCallbackQuery", "callback_query_id"},
	"answerinlinequery":      {"answerInlineQuery", "inline_query_id"},
	"answerprecheckoutquery": {"answerPreCheckoutQuery", "pre_checkout_query_id"},
	"answershippingquery":    {"answerShippingQuery", "shipping_query_id"},
}

// QueryAnswerMethods lists the Bot API methods the gateway journals by the
// query they answer (at most one answer per query and update), in
// Telegram's spelling.
func QueryAnswerMethods() []string {
	return []string{"answerCallbackQuery", "answerInlineQuery", "answerPreCheckoutQuery", "answerShippingQuery"}
}

// queryAnswerKey returns, for a call that answers a query, the method's
// canonical spelling and the journal hash that names the query; ok is
// false for any other call, and for an answer whose query id cannot be
// read (it is then journaled by its parameters, as any call).
func queryAnswerKey(c *call) (method, hash string, ok bool) {
	qa, found := queryAnswers[strings.ToLower(c.method)]
	if !found {
		return "", "", false
	}
	var id string
	for _, p := range canonicalParams(c.contentType, c.query, c.prefix, c.complete) {
		if p.name == qa.param {
			if id != "" && id != p.value {
				return "", "", false // two ids: let Telegram refuse it
			}
			id = p.value
		}
	}
	if id == "" || strings.HasPrefix(id, "\x00") {
		return "", "", false
	}
	sum := sha256.Sum256([]byte("query\x00" + qa.method + "\x00" + id))
	return qa.method, hex.EncodeToString(sum[:]), true
}

// answerRefusedQueryOpen reports whether Telegram refused an answer to a
// query with a 400 that leaves the query open (a text too long, a bad
// result), so that its next answer is sent rather than given this
// refusal: every 400 but the one saying the query is gone ("query is too
// old and response timeout expired or query ID is invalid",
// QUERY_ID_INVALID), which is final. A 400 that is not Telegram's JSON (a
// proxy's page) is not Telegram's refusal: the answer may have arrived.
func answerRefusedQueryOpen(a answer) bool {
	if a.outcome != wire.OutcomeAnswered || a.status != http.StatusBadRequest || !a.refusal {
		return false
	}
	d := strings.ToLower(string(a.body))
	return !strings.Contains(d, "query is too old") && !strings.Contains(d, "query_id_invalid") && !strings.Contains(d, "query id is invalid")
}

// queryTurns lets one answer per query and update be in flight at a time.
type queryTurns = holds[queryTurn]

type queryTurn struct {
	updateID int64
	hash     string
}

// acquireTurn waits for k's turn in q, or until ctx ends (then its
// error), and returns the function that ends the turn.
func acquireTurn(ctx context.Context, q *queryTurns, k queryTurn) (release func(), err error) {
	for {
		release, busy := q.take(k)
		if release != nil {
			return release, nil
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
