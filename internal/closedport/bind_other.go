//go:build !unix

package closedport

import "net"

// bind listens on a free loopback port and closes the listener: the port
// refuses connections, but is not kept from other listeners.
func bind() (addr string, release func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr = l.Addr().String()
	l.Close()
	return addr, func() {}, nil
}
