package throttle

import (
	"io"
	"net/http"
)

// Inspect exposes the transport's reading of a request to the tests.
func Inspect(req *http.Request) (chat int64, found, paid bool, body io.ReadCloser, replayable bool, err error) {
	tg, body, replay, err := inspect(req)
	return tg.chat, tg.found, tg.paid, body, replay != nil, err
}

// JSONTarget is a target as the tests of fromJSON compare it.
type JSONTarget struct {
	Chat        int64
	Found, Paid bool
}

func (j JSONTarget) target() target { return target{chat: j.Chat, found: j.Found, paid: j.Paid} }

func jsonTarget(t target) JSONTarget { return JSONTarget{Chat: t.chat, Found: t.found, Paid: t.paid} }

// FromJSON runs fromJSON on data over what start holds (as from a query).
func FromJSON(start JSONTarget, data []byte) JSONTarget {
	t := start.target()
	t.fromJSON(data)
	return jsonTarget(t)
}

// ScanJSON runs fromJSON's fast path alone: what it found, and false when
// it left data to the decoder.
func ScanJSON(start JSONTarget, data []byte) (JSONTarget, bool) {
	t, ok := scanJSON(start.target(), data)
	return jsonTarget(t), ok
}

// DecodeJSON runs fromJSONDecoded, the definition of fromJSON's answer.
func DecodeJSON(start JSONTarget, data []byte) JSONTarget {
	t := start.target()
	t.fromJSONDecoded(data)
	return jsonTarget(t)
}
