package relay

import (
	"net"
	"sync"
)

// Connections of the webhook.
//
// Telegram opens at most max_connections (1 to 100) connections to a
// webhook at once, so the webhook needs few; anyone else who can reach the
// address can open many, and each costs a goroutine, buffers and a file
// descriptor until a time bound ends it. Without a cap, enough of them
// would take the descriptors the store and the forward need. So the
// webhook serves at most webhookConns connections at once; a connection
// beyond them waits in the listen backlog until one ends, as the time
// bounds make every connection end.
const (
	// minWebhookConns is the webhook's connection cap for Telegram's
	// default max_connections (40) and below.
	minWebhookConns = 256
	// webhookConnsPerTelegramConn scales the cap with max_connections: a
	// TLS-terminating proxy in front may keep more connections to the
	// webhook than Telegram keeps to it.
	webhookConnsPerTelegramConn = 4
)

// webhookConns is the webhook's connection cap for setWebhook's
// max_connections (zero: Telegram's default).
func webhookConns(maxConnections int) int {
	return max(minWebhookConns, webhookConnsPerTelegramConn*maxConnections)
}

// capListener is a listener that holds at most cap(slots) accepted
// connections open at once: Accept waits for one of them to close. full
// is called, without blocking, each time Accept finds every slot taken.
type capListener struct {
	net.Listener
	slots     chan struct{}
	full      func()
	closeOnce sync.Once
	closed    chan struct{}
}

func newCapListener(l net.Listener, n int, full func()) *capListener {
	return &capListener{Listener: l, slots: make(chan struct{}, n), full: full, closed: make(chan struct{})}
}

func (l *capListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.full()
		select {
		case l.slots <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &capConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *capListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// capConn gives its slot back on its first Close.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
