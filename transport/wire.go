package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"golang.org/x/net/http/httpguts"

	"github.com/tgrelay/tgrelay/internal/h1client"
	"github.com/tgrelay/tgrelay/internal/readall"
	"github.com/tgrelay/tgrelay/internal/safeerr"
)

// hopHeaders are framed by the transport itself; the caller's values are
// dropped.
var hopHeaders = map[string]bool{
	"Host":              true,
	"Content-Length":    true,
	"Connection":        true,
	"Transfer-Encoding": true,
	"Keep-Alive":        true,
	"Proxy-Connection":  true,
	"Te":                true,
	"Trailer":           true,
	"Upgrade":           true,
}

// writeHead serialises the request head in origin form. It validates
// method, host and header fields; a failure happens before any I/O. The
// error never quotes the URL.
func writeHead(buf *bytes.Buffer, req *http.Request, bodyLen int, closeConn bool) error {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validToken(method) {
		return errors.New("transport: invalid method")
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return errors.New("transport: invalid host")
	}
	uri := req.URL.RequestURI()
	for i := 0; i < len(uri); i++ {
		if uri[i] <= ' ' || uri[i] == 0x7f {
			return errors.New("transport: invalid request path")
		}
	}
	buf.WriteString(method)
	buf.WriteByte(' ')
	buf.WriteString(uri)
	buf.WriteString(" HTTP/1.1\r\nHost: ")
	buf.WriteString(host)
	buf.WriteString("\r\n")
	for name, values := range req.Header {
		if hopHeaders[http.CanonicalHeaderKey(name)] {
			continue
		}
		if err := h1client.CheckHeader(name, values); err != nil {
			return fmt.Errorf("transport: %w", err)
		}
		for _, v := range values {
			buf.WriteString(name)
			buf.WriteString(": ")
			buf.WriteString(v)
			buf.WriteString("\r\n")
		}
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions, http.MethodTrace:
		if bodyLen == 0 {
			break
		}
		fallthrough
	default:
		buf.WriteString("Content-Length: ")
		buf.WriteString(strconv.Itoa(bodyLen))
		buf.WriteString("\r\n")
	}
	if closeConn {
		buf.WriteString("Connection: close\r\n")
	}
	buf.WriteString("\r\n")
	return nil
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return true
}

// readResponse reads one final answer to req from br, skipping up to
// h1client.MaxInterim 1xx interim answers (101 Switching Protocols is an
// error), and reads its whole body into memory. The byte limit is enforced
// by the h1client.Limit beneath br. The returned response's Body is in
// memory.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	resp, err := h1client.ReadHead(br, req)
	switch {
	case errors.Is(err, h1client.ErrSwitchingProtocols), errors.Is(err, h1client.ErrTooManyInterim):
		return nil, fmt.Errorf("transport: %w", err)
	case err != nil:
		return nil, fmt.Errorf("transport: reading response: %w", safeerr.Unquoted(err))
	}
	// The h1client.Limit beneath br bounds the body.
	body, err := readall.Bounded(resp.Body, resp.ContentLength, math.MaxInt64)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("transport: reading response body: %w", safeerr.Unquoted(err))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if req.Method != http.MethodHead {
		resp.ContentLength = int64(len(body))
	}
	resp.TransferEncoding = nil
	resp.Header.Del("Transfer-Encoding")
	return resp, nil
}
