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
