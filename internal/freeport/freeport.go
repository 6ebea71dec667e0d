// Package freeport names a free loopback TCP port for a server that must be
// named before it starts: a flag of a child process, a URL in a config.
//
// The usual way, listening on port 0 and closing the listener, hands out a
// port from the kernel's ephemeral range. Until the server binds it, the
// kernel may give the same port to any process's outgoing connection or
// port-0 listener, and the server then fails with "address already in
// use" — on a busy machine running test packages in parallel, now and
// then. [Addr] picks a port below the ephemeral range, which the kernel
// never hands out on its own, so only another caller naming a fixed port
// can take it meanwhile.
//
// It is for tests and benchmarks only. A server that can listen first and
// pass its listener on should do that instead.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

const (
	// lowest is the lowest port Addr picks: above the ports services
	// commonly listen on.
	lowest = 10000
	// ephemeralDefault is where the ephemeral range starts when the
	// system does not say: Linux's default (and below the IANA range
	// other systems use).
	ephemeralDefault = 32768
	// tries bounds the ports Addr tries before it falls back to port 0.
	tries = 64
)

// Addr returns "127.0.0.1:<port>" of a loopback TCP port that was free a
// moment ago and lies outside the kernel's ephemeral range when it can.
func Addr() (string, error) {
	if hi := ephemeralLow(); hi-lowest >= 1000 {
		for range tries {
			port := lowest + rand.IntN(hi-lowest)
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			l, err := net.Listen("tcp", addr)
			if err != nil {
				continue // taken: try another
			}
			if err := l.Close(); err != nil {
				return "", fmt.Errorf("freeport: closing %s: %w", addr, err)
			}
			return addr, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("freeport: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("freeport: closing %s: %w", addr, err)
	}
	return addr, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return ephemeralDefault
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return ephemeralDefault
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return ephemeralDefault
	}
	return n
}
