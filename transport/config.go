package transport

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/tgrelay/tgrelay/internal/configerr"
)

// Defaults and limits of [Config]. A zero field in Config means its default.
const (
	// DefaultConnectTimeout is the one budget covering the address lookup,
	// the TCP connection race, the proxy CONNECT and the TLS handshake.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultAttemptDelay is the RFC 8305 Connection Attempt Delay: a new
	// connection attempt starts this long after the previous one unless
	// one of them failed first.
	DefaultAttemptDelay = 250 * time.Millisecond
	// MinAttemptDelay and MaxAttemptDelay bound Config.AttemptDelay
	// (RFC 8305 §5: never below 10 ms; 2 s is the recommended maximum).
	MinAttemptDelay = 10 * time.Millisecond
	MaxAttemptDelay = 2 * time.Second
	// DefaultResolutionDelay is the RFC 8305 Resolution Delay: how long the
	// race waits for the AAAA answer once the A answer has arrived.
	DefaultResolutionDelay = 50 * time.Millisecond
	// DefaultResponseTimeout bounds the time from the first request byte to
	// the end of the answer. Override it per call with [WithResponseTimeout].
	DefaultResponseTimeout = 30 * time.Second
	// DefaultMaxResponseBytes bounds the raw answer, head and body together.
	DefaultMaxResponseBytes = 1 << 20
	// DefaultMaxRequestBytes bounds a request body, which is read into
	// memory before any connection is sought (Telegram accepts uploads of
	// up to 50 MB).
	DefaultMaxRequestBytes = 50 << 20
	// DefaultMaxIdleConnsPerHost bounds the idle keep-alive connections kept
	// per destination (scheme, host, port and proxy). A Telegram sender
	// talks to one host, and a broadcast window of about 30 concurrent sends
	// (Telegram's per-bot rate) should not pay a TLS handshake per message.
	DefaultMaxIdleConnsPerHost = 32
	// DefaultIdleConnTimeout is how long an idle connection may be reused.
	// It is kept well below common server keep-alive timeouts (nginx: 75 s)
	// to make a server-side close racing a new request rare.
	DefaultIdleConnTimeout = 30 * time.Second
)

// LookupFunc resolves host to addresses of one family: network is "ip4" or
// "ip6". It has the signature of [net.Resolver.LookupNetIP] and must return
// when ctx ends.
type LookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// DialFunc opens a TCP connection to address ("ip:port", an IP literal).
// It has the signature of [net.Dialer.DialContext] and must return when ctx
// ends.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Config configures a [Transport]. The zero value is ready to use: every
// zero field means the default named in its comment. [New] copies it, so
// later changes by the caller have no effect; negative durations or sizes
// are errors naming the field.
type Config struct {
	// ConnectTimeout is the single budget for lookup, connection race,
	// proxy CONNECT and TLS handshake. Zero means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// AttemptDelay is the pause between connection attempts. Zero means
	// DefaultAttemptDelay; otherwise it must lie within
	// [MinAttemptDelay, MaxAttemptDelay].
	AttemptDelay time.Duration
	// ResolutionDelay is how long to wait for AAAA after A. Zero means
	// DefaultResolutionDelay.
	ResolutionDelay time.Duration
	// ResponseTimeout bounds write plus answer. Zero means
	// DefaultResponseTimeout.
	ResponseTimeout time.Duration
	// MaxResponseBytes bounds the raw answer (head and body). Zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// MaxRequestBytes bounds the request body. Zero means
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxIdleConnsPerHost bounds idle connections per destination. Zero
	// means DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// IdleConnTimeout is how long an idle connection may wait for reuse.
	// Zero means DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// DisableKeepAlives makes every request use a new connection and send
	// "Connection: close".
	DisableKeepAlives bool
	// TLSConfig is used for https destinations and https proxies. It is
	// cloned; NextProtos is forced to "http/1.1" and ServerName is set per
	// host. Nil means the default configuration (system roots).
	TLSConfig *tls.Config
	// Proxy picks the proxy for a request, as [http.Transport.Proxy] does.
	// Nil means [http.ProxyFromEnvironment] (HTTPS_PROXY, HTTP_PROXY,
	// NO_PROXY). To use no proxy, set a function that returns nil, nil.
	// Supported proxy schemes are http and https; the request always goes
	// through a CONNECT tunnel.
	Proxy func(*http.Request) (*url.URL, error)
	// LookupFunc resolves host names. Nil means the default
	// [net.Resolver]'s LookupNetIP.
	LookupFunc LookupFunc
	// DialFunc opens each TCP connection attempt. Nil means a zero
	// [net.Dialer]'s DialContext.
	DialFunc DialFunc
	// Test holds hooks for tests of this package; leave it zero.
	Test TestHooks
}

// TestHooks holds test-only hooks of [Config].
type TestHooks struct {
	// NowFunc replaces time.Now for idle-connection expiry. Nil means
	// time.Now.
	NowFunc func() time.Time
}

// ConfigError is an invalid [Config] field: Field names it
// ("AttemptDelay") and Err says what is wrong. It is the one config error
// type of every tgrelay package (relay.ConfigError is the same type).
type ConfigError = configerr.Error

func badField(field, format string, args ...any) error {
	return configerr.New("transport", field, format, args...)
}

// Validate reports the first invalid field of c as a *[ConfigError], as
// [New] would. It does no I/O.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ConnectTimeout", &c.ConnectTimeout, DefaultConnectTimeout},
		{"AttemptDelay", &c.AttemptDelay, DefaultAttemptDelay},
		{"ResolutionDelay", &c.ResolutionDelay, DefaultResolutionDelay},
		{"ResponseTimeout", &c.ResponseTimeout, DefaultResponseTimeout},
		{"IdleConnTimeout", &c.IdleConnTimeout, DefaultIdleConnTimeout},
	}
	for _, d := range durations {
		if *d.v < 0 {
			return c, badField(d.name, "is %v: want 0 or more", *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.AttemptDelay < MinAttemptDelay || c.AttemptDelay > MaxAttemptDelay {
		return c, badField("AttemptDelay", "is %v: want %v to %v", c.AttemptDelay, MinAttemptDelay, MaxAttemptDelay)
	}
	sizes := []struct {
		name string
		v    *int64
		def  int64
	}{
		{"MaxResponseBytes", &c.MaxResponseBytes, DefaultMaxResponseBytes},
		{"MaxRequestBytes", &c.MaxRequestBytes, DefaultMaxRequestBytes},
	}
	for _, s := range sizes {
		if *s.v < 0 {
			return c, badField(s.name, "is %d: want 0 or more", *s.v)
		}
		if *s.v == 0 {
			*s.v = s.def
		}
	}
	if c.MaxIdleConnsPerHost < 0 {
		return c, badField("MaxIdleConnsPerHost", "is %d: want 0 or more", c.MaxIdleConnsPerHost)
	}
	if c.MaxIdleConnsPerHost == 0 {
		c.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if c.TLSConfig == nil {
		c.TLSConfig = &tls.Config{}
	} else {
		c.TLSConfig = c.TLSConfig.Clone()
	}
	c.TLSConfig.NextProtos = []string{"http/1.1"}
	if c.Proxy == nil {
		c.Proxy = http.ProxyFromEnvironment
	}
	if c.LookupFunc == nil {
		c.LookupFunc = (&net.Resolver{}).LookupNetIP
	}
	if c.DialFunc == nil {
		c.DialFunc = (&net.Dialer{}).DialContext
	}
	if c.Test.NowFunc == nil {
		c.Test.NowFunc = time.Now
	}
	return c, nil
}
