//go:build !unix

package transport

import "net"

// peekClosed cannot look at the socket on this platform and assumes an idle
// connection is usable; a stale one then shows up as a failed request.
func peekClosed(net.Conn) bool { return false }
