//go:build unix

package h1client

import (
	"net"
	"syscall"
)

// Closed reports whether an idle connection is unusable: the peer sent
// EOF, reset it, or sent bytes nobody asked for. It peeks at the socket
// without blocking. A connection without a file descriptor is assumed
// usable.
func Closed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	dead := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR:
			dead = false
		case err != nil, n >= 0:
			dead = true // EOF (n == 0), unsolicited data (n > 0), or an error
		}
		return true
	})
	return err != nil || dead
}
