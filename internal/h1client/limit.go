package h1client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ErrLimit is a [Limit]'s read past its budget.
var ErrLimit = errors.New("response limit reached")

// Limit reads from R at most Remaining bytes, then fails with [ErrLimit]
// and sets Hit. Placed under a bufio.Reader, it counts an answer's raw
// bytes, whatever the parser above asks for.
//
// Once Remaining is spent a read still asks R for one byte: an answer
// framed by its connection's close ends there, and one that ends exactly at
// the budget is not too large (R's end of file, or its error, is returned
// as it is). Only a byte beyond the budget fails with ErrLimit.
type Limit struct {
	R         io.Reader
	Remaining int64
	Hit       bool
}

func (l *Limit) Read(p []byte) (int, error) {
	if l.Remaining <= 0 {
		if len(p) == 0 {
			return 0, nil
		}
		var probe [1]byte
		if n, err := l.R.Read(probe[:]); n == 0 && err != nil {
			return 0, err
		}
		l.Hit = true
		return 0, ErrLimit
	}
	if int64(len(p)) > l.Remaining {
		p = p[:l.Remaining]
	}
	n, err := l.R.Read(p)
	l.Remaining -= int64(n)
	return n, err
}

// MaxInterim bounds the 1xx interim answers [ReadHead] skips.
const MaxInterim = 8

// ErrSwitchingProtocols is [ReadHead]'s answer to a 101: a request of
// ours never asks to switch.
var ErrSwitchingProtocols = errors.New("unexpected 101 Switching Protocols")

// ReadHead reads the answer to req (nil for a POST or GET) from br: its
// status line and header, past up to [MaxInterim] 1xx interim answers,
// which have no body. The body is left to read from the response.
func ReadHead(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for range MaxInterim + 1 {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			resp.Body.Close()
			return nil, ErrSwitchingProtocols
		case resp.StatusCode < 200:
			continue // interim: no body
		}
		return resp, nil
	}
	return nil, ErrTooManyInterim
}

// ErrTooManyInterim is [ReadHead]'s answer to more than [MaxInterim]
// interim answers in a row.
var ErrTooManyInterim = fmt.Errorf("more than %d interim (1xx) answers", MaxInterim)
