package h1client

import (
	"errors"
	"fmt"

	"golang.org/x/net/http/httpguts"
)

// ErrInvalidHeader is a request header whose name or value is not valid
// HTTP: no connection should be given a request carrying it.
var ErrInvalidHeader = errors.New("invalid request header")

// CheckHeader reports whether the header name and its values are valid
// HTTP, as net/http checks them before it writes a request: a line break
// in a value would let the value write headers of its own. The error
// wraps [ErrInvalidHeader]. It names a header whose value is invalid, but
// never quotes a value, which may be a credential, nor an invalid name,
// which may be a whole header line ("Authorization: Bearer …") given as a
// name by mistake.
func CheckHeader(name string, values []string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("%w name (not an HTTP token)", ErrInvalidHeader)
	}
	for _, v := range values {
		if !httpguts.ValidHeaderFieldValue(v) {
			return fmt.Errorf("%w value of %s", ErrInvalidHeader, name)
		}
	}
	return nil
}
