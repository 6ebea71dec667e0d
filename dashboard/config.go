package dashboard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Defaults and bounds of [Config].
const (
	// DefaultPageSize is the rows per page of the Updates and Exhaustions
	// lists; MaxPageSize bounds it and any ?limit= a request asks for.
	DefaultPageSize = 50
	MaxPageSize     = 500
	// DefaultMaxSSEClients is how many browsers may follow the live
	// refresh stream at once; MaxMaxSSEClients bounds it. A browser turned
	// away refreshes by polling instead.
	DefaultMaxSSEClients = 16
	MaxMaxSSEClients     = 1024
	// DefaultRefreshInterval is how often open pages refresh themselves;
	// MinRefreshInterval and MaxRefreshInterval bound it.
	DefaultRefreshInterval = 2 * time.Second
	MinRefreshInterval     = 250 * time.Millisecond
	MaxRefreshInterval     = time.Minute
	// DefaultMaxBodyBytes bounds the formatted update body an update's page
	// shows (the rest is cut, and the page says so); MaxMaxBodyBytes bounds
	// the setting.
	DefaultMaxBodyBytes = 64 << 10
	MaxMaxBodyBytes     = 4 << 20
	// DefaultMaxPageBytes bounds a rendered page; a page that would be
	// larger is refused with 500 instead of being sent. MaxMaxPageBytes
	// bounds the setting.
	DefaultMaxPageBytes = 4 << 20
	MaxMaxPageBytes     = 64 << 20
	// MaxBroadcasts bounds how many broadcast journals the Broadcasts page
	// reads; MaxListedRecipients bounds the recipients one list shows.
	MaxBroadcasts       = 100
	MaxListedRecipients = 1000
	// MaxChatScan bounds how many rows one Updates page reads when it
	// filters by chat (the store has no chat index); the page then offers
	// to continue from where the scan stopped.
	MaxChatScan = 5000
	// MinAdminTokenLen is the shortest admin token accepted: a short one
	// could be guessed.
	MinAdminTokenLen = 16
	// sseLifetime bounds one refresh stream; the browser reconnects.
	sseLifetime = 5 * time.Minute
)

// ErrTokenRequired is returned by [CheckExposure] for a non-loopback
// listen address without an admin token.
var ErrTokenRequired = errors.New("dashboard: an admin token is required on a non-loopback address")

// Config configures a [Handler]. [New] copies it, validates it and names the
// field of any invalid setting. Zero values take the documented defaults.
type Config struct {
	// Store is the update store the pages read. Required. When it is also
	// an [intake.Store] (every shipped store is), the Exhaustions page
	// offers Acknowledge;
	// Requeue, the listings, search, "held behind" and the Processes page
	// need only the [intake.AdminStore]; the Replies page needs an
	// [intake.JournalStore]; an [intake.HealthChecker] and an
	// [intake.ProcessStore] feed the health verdict.
	Store intake.AdminStore
	// StoreName names the store on the Overview, for example "sqlite
	// (./tgrelay.db)". Empty shows "unnamed". It must carry no credential:
	// pass a redacted URL.
	StoreName string
	// Recorder feeds the Overview's charts, counters, webhook and gateway
	// figures. Nil shows the store's figures only.
	Recorder *Recorder
	// BroadcastDir is the directory of the broadcast journals to show (the
	// --dir of tgrelay broadcast). Empty: the Broadcasts page says none is
	// configured.
	BroadcastDir string

	// AdminToken, when set, is required of every request: through the
	// login form (which sets a session cookie derived from, never equal
	// to, the token) or an "Authorization: Bearer" header. Empty: the
	// handler answers only requests that arrived on a loopback address and
	// name a loopback host (see [CheckExposure]). [MinAdminTokenLen] to
	// 1024 bytes.
	AdminToken string
	// ReadOnly hides the Acknowledge and Requeue buttons and refuses every
	// state-changing request (login and logout excepted).
	ReadOnly bool
	// Secrets are masked wherever they could appear in a page or a log
	// line: the bot token and the webhook secret, by a [botapi.Redactor]
	// (which ignores values shorter than botapi.MinSecretLen). The admin
	// token is always masked, and so is anything shaped like a bot token.
	Secrets []string

	// Prefix is the path the handler is mounted at; it starts and ends
	// with "/". Zero means "/".
	Prefix string
	// PageSize is the rows per list page, 1 to [MaxPageSize]. Zero means
	// [DefaultPageSize].
	PageSize int
	// MaxSSEClients bounds the live refresh streams, 1 to
	// [MaxMaxSSEClients]. Zero means [DefaultMaxSSEClients].
	MaxSSEClients int
	// RefreshInterval is how often open pages refresh,
	// [MinRefreshInterval] to [MaxRefreshInterval]. Zero means
	// [DefaultRefreshInterval].
	RefreshInterval time.Duration
	// MaxBodyBytes bounds the update body shown on an update's page, 1 KiB
	// to [MaxMaxBodyBytes]. Zero means [DefaultMaxBodyBytes].
	MaxBodyBytes int
	// MaxPageBytes bounds a rendered page, 64 KiB to [MaxMaxPageBytes].
	// Zero means [DefaultMaxPageBytes].
	MaxPageBytes int
	// TrustedProxies are the addresses of the reverse proxies in front of
	// the handler (for example 127.0.0.1/32 for a proxy on the same host).
	// A request from one of them is taken at its word: X-Forwarded-Proto
	// "https" makes the cookies Secure, and the rightmost address of
	// X-Forwarded-For that is not a trusted proxy is the client that
	// failed sign-ins are counted against. Empty trusts no proxy: the
	// cookies are Secure only on a TLS connection, and the client is the
	// connection's address.
	TrustedProxies []netip.Prefix

	// Logger receives the actions taken (acknowledge, requeue) and the
	// refusals (authentication, CSRF). Nil discards. No line carries a
	// secret.
	Logger *slog.Logger
}

// withDefaults returns a validated copy of c with its defaults filled in.
func (c Config) withDefaults() (Config, error) {
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("dashboard: Config.%s: %s", field, fmt.Sprintf(format, args...))
	}
	if c.Store == nil {
		return c, bad("Store", "required")
	}
	if c.Prefix == "" {
		c.Prefix = "/"
	}
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, " {}?#%") {
		return c, bad("Prefix", "want a path starting and ending with /")
	}
	if c.AdminToken != "" && (len(c.AdminToken) < MinAdminTokenLen || len(c.AdminToken) > 1024) {
		return c, bad("AdminToken", "want %d to 1024 bytes (a long random string)", MinAdminTokenLen)
	}
	if strings.TrimSpace(c.AdminToken) != c.AdminToken {
		return c, bad("AdminToken", "has leading or trailing space")
	}
	type bound struct {
		field      string
		v          *int
		def, lo, h int
	}
	for _, b := range []bound{
		{"PageSize", &c.PageSize, DefaultPageSize, 1, MaxPageSize},
		{"MaxSSEClients", &c.MaxSSEClients, DefaultMaxSSEClients, 1, MaxMaxSSEClients},
		{"MaxBodyBytes", &c.MaxBodyBytes, DefaultMaxBodyBytes, 1 << 10, MaxMaxBodyBytes},
		{"MaxPageBytes", &c.MaxPageBytes, DefaultMaxPageBytes, 64 << 10, MaxMaxPageBytes},
	} {
		if *b.v == 0 {
			*b.v = b.def
		}
		if *b.v < b.lo || *b.v > b.h {
			return c, bad(b.field, "%d: want %d to %d (0: %d)", *b.v, b.lo, b.h, b.def)
		}
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.RefreshInterval < MinRefreshInterval || c.RefreshInterval > MaxRefreshInterval {
		return c, bad("RefreshInterval", "%v: want %v to %v", c.RefreshInterval, MinRefreshInterval, MaxRefreshInterval)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Secrets = append([]string(nil), c.Secrets...)
	c.TrustedProxies = append([]netip.Prefix(nil), c.TrustedProxies...)
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			return c, bad("TrustedProxies", "entry %d is not a valid prefix", i)
		}
		c.TrustedProxies[i] = p.Masked()
	}
	return c, nil
}

// CheckExposure refuses to serve the dashboard on a non-loopback listen
// address without an admin token: it returns [ErrTokenRequired] (wrapped,
// naming the address) when addr ("host:port", as net.Listen takes it, or
// a listener's address) is not loopback and adminToken is empty. An
// empty host or an unspecified address (":8081", "0.0.0.0:8081") listens
// on every interface and is not loopback. "localhost" is loopback.
func CheckExposure(addr, adminToken string) error {
	if adminToken != "" || isLoopbackHostPort(addr) {
		return nil
	}
	return fmt.Errorf("%w: %s (set an admin token, or listen on 127.0.0.1)", ErrTokenRequired, addr)
}

// isLoopbackHostPort reports whether addr's host is a loopback IP literal or
// "localhost".
func isLoopbackHostPort(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return isLoopbackHost(host)
}

// isLoopbackHost reports whether host (no port) is a loopback IP literal or
// "localhost".
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // a zone
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
