//go:build unix

package transport

import (
	"net"
	"syscall"
)

// peekClosed reports whether an idle connection is unusable: the peer sent
// EOF, reset it, or sent bytes nobody asked for. It peeks without blocking,
// so a server that closed an idle connection is noticed before a request is
// written to it. Connections without a file descriptor are assumed usable.
func peekClosed(c net.Conn) bool {
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
