package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tgrelay/tgrelay/intake"
)

// replyCall is one call of a webhook reply.
type replyCall struct {
	method string
	params []byte
}

// byteOrderMark is UTF-8's byte order mark, which some app frameworks
// write before a JSON body.
var byteOrderMark = []byte("\ufeff")

// parseReplies reads a webhook reply: a JSON object with a string "method"
// (Telegram's webhook reply) or a JSON array of such objects (our
// extension, performed in order), after any byte order mark. ok is false
// for a body that is neither (no reply); err reports a body that looks
// like a reply but cannot be performed, such as one that names a "method"
// but is not valid JSON.
func parseReplies(body []byte) (calls []replyCall, ok bool, err error) {
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(body), byteOrderMark))
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return nil, false, nil
	}
	var objs []map[string]json.RawMessage
	if trimmed[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal(trimmed, &obj) != nil {
			return unparsable(body, trimmed)
		}
		if _, has := obj["method"]; !has {
			return nil, false, nil
		}
		objs = []map[string]json.RawMessage{obj}
	} else {
		if json.Unmarshal(trimmed, &objs) != nil {
			return unparsable(body, trimmed)
		}
		if len(objs) == 0 {
			return nil, false, nil
		}
		if _, has := objs[0]["method"]; !has {
			return nil, false, nil // an array that is not calls
		}
		if len(objs) > MaxReplies {
			return nil, true, fmt.Errorf("the reply has %d calls, more than %d", len(objs), MaxReplies)
		}
	}
	for i, obj := range objs {
		var method string
		if json.Unmarshal(obj["method"], &method) != nil || method == "" {
			return nil, true, fmt.Errorf("call %d of the reply has no string method", i+1)
		}
		delete(obj, "method")
		params, err := json.Marshal(obj)
		if err != nil {
			return nil, true, fmt.Errorf("call %d of the reply: %w", i+1, err)
		}
		calls = append(calls, replyCall{method: method, params: params})
	}
	return calls, true, nil
}

// unparsable is parseReplies' answer for a body that starts like JSON but
// does not parse. One that names a "method" is a reply that cannot be
// performed (cut at the read limit, or broken by the app's serializer),
// never taken for no reply at all; anything else is no reply.
func unparsable(body, trimmed []byte) ([]replyCall, bool, error) {
	if !bytes.Contains(trimmed, []byte(`"method"`)) {
		return nil, false, nil
	}
	if len(body) >= DefaultMaxResponseBytes {
		return nil, true, fmt.Errorf("the reply is larger than %d bytes", DefaultMaxResponseBytes)
	}
	return nil, true, errors.New("the reply names a method but is not valid JSON")
}

// ReplyError is a webhook reply that could not be performed now; the
// update is tried again, and the calls of the reply that already have an
// outcome are answered from the journal then, not sent twice.
type ReplyError struct {
	Method  string
	Status  int
	Outcome string
}

// Error implements error.
func (e *ReplyError) Error() string {
	return fmt.Sprintf("forward: webhook reply %s answered %d (%s): tried again with the update", e.Method, e.Status, e.Outcome)
}

// performReplies sends the webhook replies in an update answer's body
// through the Replier, in order, under the attempt's identity. The update
// completes only when each has a known outcome: Telegram answered (an
// error included), or the outcome is unknown (recorded in the journal,
// never sent again). A call that was not dispatched or throttled fails the
// attempt so the update is tried again; so does a stale attempt. A reply
// the gateway refuses (a malformed one) is reported and skipped.
func (f *Forwarder) performReplies(ctx context.Context, id intake.Identity, body []byte) error {
	calls, ok, err := parseReplies(body)
	if !ok {
		return nil
	}
	if err != nil {
		f.unacted.Add(1)
		if f.unactedFunc != nil {
			f.unactedFunc(UnactedReply{UpdateID: id.UpdateID, Attempt: id.Attempt, Bytes: len(body), Reason: err.Error()})
		}
		return nil
	}
	for _, c := range calls {
		status, outcome, replayed := f.replier.Reply(ctx, id, c.method, c.params)
		if f.replyFunc != nil {
			f.replyFunc(Reply{UpdateID: id.UpdateID, Attempt: id.Attempt, Method: c.method, Status: status, Outcome: outcome, Replayed: replayed})
		}
		switch {
		case outcome == "not-dispatched" || outcome == "throttled" || status == 429 || outcome == "stale":
			return &ReplyError{Method: c.method, Status: status, Outcome: outcome}
		case outcome == "" && status == 0:
			return &ReplyError{Method: c.method, Outcome: "no answer"}
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(&ReplyError{Method: c.method, Status: status, Outcome: outcome}, err)
		}
	}
	return nil
}
