package h1client

import (
	"context"
	"net"
	"time"
)

// Past is a deadline already gone: set on a connection, it ends a blocked
// read or write at once, and makes the next one return without waiting.
var Past = time.Unix(1, 0)

// AfterDone ends conn's blocked reads and writes once ctx ends, by setting
// its deadline to [Past], and returns what stops the watch: as
// [context.AfterFunc]'s stop, it reports false if ctx had ended it first,
// which leaves conn unfit to carry another request. A ctx that never ends
// costs nothing.
func AfterDone(ctx context.Context, conn net.Conn) (stop func() bool) {
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, func() { conn.SetDeadline(Past) })
}
