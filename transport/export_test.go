package transport

import (
	"bufio"
	"bytes"
	"net/http"

	"github.com/tgrelay/tgrelay/internal/h1client"
)

// ReadResponseForTest parses data as the answer to a POST with the same
// limit logic RoundTrip uses.
func ReadResponseForTest(data []byte, limit int64) (*http.Response, error) {
	lim := &h1client.Limit{R: bytes.NewReader(data), Remaining: limit}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	resp, err := readResponse(bufio.NewReader(lim), req)
	if err != nil && lim.Hit {
		return nil, ErrResponseTooLarge
	}
	return resp, err
}
