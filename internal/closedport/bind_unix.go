//go:build unix

package closedport

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// bind binds a TCP socket to a free loopback port without listening on it.
func bind() (addr string, release func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return "", nil, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %w", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: unexpected address %T", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port)), func() { syscall.Close(fd) }, nil
}
