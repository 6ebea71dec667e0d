// Package closedport gives tests a loopback TCP address that refuses every
// connection, and that no other listener can take while the test runs.
//
// The usual way to get such an address, listening on port 0 and closing the
// listener, leaves the port free: a test running in parallel can be given
// it for a listener of its own, and a connection meant to be refused is
// then accepted. [Addr] binds a socket to the port and never listens on
// it, so the kernel answers every connection with a reset (connection
// refused) and keeps the port taken until the test ends.
package closedport

import "testing"

// Addr returns "127.0.0.1:<port>" of a loopback TCP port that refuses
// every connection until tb ends.
func Addr(tb testing.TB) string {
	tb.Helper()
	addr, release, err := bind()
	if err != nil {
		tb.Fatalf("closedport: %v", err)
	}
	tb.Cleanup(release)
	return addr
}
