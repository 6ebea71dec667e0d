// Package safeerr keeps what a peer sent out of error messages.
//
// net/http's parser quotes the malformed line of an answer (a status line,
// a header, a Content-Length) in its errors, and a server or proxy that
// echoes what it was sent there would put the request's URL path (and so
// the bot token) or a proxy's credentials into our error text; a proxy's
// reason phrase may quote the credentials it was sent. Unquoted and
// ProxyRefused are the rules both HTTP paths that meet such answers apply:
// package transport's and the gateway's stream transport.
package safeerr

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ProxyRefused is the error of a proxy that answered CONNECT with status
// (not 200): the status code and its standard text only, never the
// proxy's own reason phrase.
func ProxyRefused(status int) error {
	return fmt.Errorf("proxy refused CONNECT: %d %s", status, http.StatusText(status))
}

// Unquoted returns err, or, when its message quotes something, an error
// whose message is cut before the first quote. Only the parser quotes; an
// I/O failure (EOF, a deadline, a reset, a size limit) has no quote and is
// returned as it is, so errors.Is still finds its cause. The cut error
// does not wrap err: unwrapping would reach the quoted text again.
func Unquoted(err error) error {
	msg := err.Error()
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return err
	}
	return errors.New(strings.TrimRight(msg[:i], " :") + " (the answer's bytes are not quoted)")
}
