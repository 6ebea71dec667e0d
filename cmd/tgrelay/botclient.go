package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/transport"
)

// maxCAFileBytes bounds --ca-file.
const maxCAFileBytes = 1 << 20

// maxBotTimeout bounds --timeout.
const maxBotTimeout = 10 * time.Minute

// checkToken refuses a token that is not "<bot id>:<secret>"
// ([botapi.ValidToken], the library's rule), naming flag and never quoting
// the value. A token of another shape is refused before any call.
func checkToken(flagName, token string) error {
	if !botapi.ValidToken(token) {
		return &usageError{msg: "the bot token (" + flagName + " or " + envToken + ") is malformed: want <bot id>:<secret>, as BotFather gives it"}
	}
	return nil
}

// netFlags are the flags of a command's Bot API client: --proxy, --ca-file
// and --timeout.
type netFlags struct {
	proxy   string
	caFile  string
	timeout time.Duration
}

func (n *netFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.proxy, "proxy", "", "HTTP(S) proxy `URL` for the Bot API (http:// or https://; \"none\" for a direct connection; default: HTTPS_PROXY and the other proxy environment variables)")
	fs.StringVar(&n.caFile, "ca-file", "", "PEM `file` of extra CA certificates to trust for the Bot API and the proxy (such as a corporate proxy's)")
	fs.DurationVar(&n.timeout, "timeout", transport.DefaultResponseTimeout, "bound of one Bot API call's answer once it is sent (`duration`; connecting has its own 5s budget)")
}

// transportConfig maps the flags onto a transport.Config, with errors
// naming the flag.
func (n *netFlags) transportConfig() (transport.Config, error) {
	var c transport.Config
	if n.timeout <= 0 || n.timeout > maxBotTimeout {
		return c, &usageError{msg: fmt.Sprintf("--timeout is %v: want above 0, up to %v", n.timeout, maxBotTimeout)}
	}
	c.ResponseTimeout = n.timeout
	switch n.proxy {
	case "":
	case "none":
		c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	default:
		u, err := url.Parse(n.proxy)
		if err != nil || u.Host == "" {
			return c, &usageError{msg: "--proxy is not a URL: want http://host:port or https://host:port"}
		}
		switch u.Scheme {
		case "http", "https":
		case "socks5", "socks5h", "socks4", "socks":
			return c, &usageError{msg: "--proxy: SOCKS proxies are not supported: use an http:// or https:// proxy (HTTP CONNECT)"}
		default:
			return c, &usageError{msg: "--proxy has an unsupported scheme: want http:// or https://"}
		}
		c.Proxy = http.ProxyURL(u)
	}
	if n.caFile != "" {
		pem, err := readBounded(n.caFile, maxCAFileBytes)
		if err != nil {
			return c, fmt.Errorf("--ca-file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return c, &usageError{msg: "--ca-file holds no PEM certificate"}
		}
		c.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return c, nil
}

// botAPIConfig is a command's one Bot API client configuration: where
// calls go (--api-root) and how they get there (--proxy, --ca-file,
// --timeout). It is built once, by [netFlags.botAPI], and every Bot API
// call the command makes uses it: send's, webhook's and broadcast's
// calls, and serve's webhook ownership, polling and gateway upstream
// (through relay.Config's APIRoot and BotTransport).
type botAPIConfig struct {
	// root is the Bot API root without a trailing slash.
	root string
	// transport carries the proxy, the trusted CAs and the response
	// timeout; MaxResponseBytes is left zero (each user sets its own).
	transport transport.Config
}

// botAPI builds the Bot API client configuration from the flags and the
// API root (empty: Telegram's), with errors naming the flag.
func (n *netFlags) botAPI(apiRoot string) (botAPIConfig, error) {
	if apiRoot == "" {
		apiRoot = botapi.DefaultAPIRoot
	}
	tc, err := n.transportConfig()
	if err != nil {
		return botAPIConfig{}, err
	}
	return botAPIConfig{root: strings.TrimRight(apiRoot, "/"), transport: tc}, nil
}

// httpClient returns tgrelay's dispatch-aware client configured by b,
// reading at most maxResponse bytes per answer (0: the default).
func (b botAPIConfig) httpClient(maxResponse int64) (*http.Client, error) {
	c := b.transport
	c.MaxResponseBytes = maxResponse
	hc, err := transport.NewClient(c)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	return hc, nil
}

// notDispatchedCause says in words why a request never left: the cause a
// user can act on (a name that does not resolve, an untrusted certificate,
// a proxy's refusal), or else the cause's own text.
func notDispatchedCause(nd *transport.NotDispatchedError) string {
	err := nd.Err
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case err == nil:
		return "no cause recorded"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host " + dns.Name
	case errors.As(err, &unknownCA):
		return "the server's certificate is not trusted (signed by an unknown authority; for a private CA pass --ca-file)"
	case errors.As(err, &hostErr):
		return "the server's certificate is not valid for this host"
	case errors.As(err, &invalid):
		return "the server's certificate is invalid (" + invalid.Error() + ")"
	case errors.Is(err, transport.ErrUnsupportedScheme) && nd.Stage == transport.StageProxy:
		return "the proxy's scheme is not supported (SOCKS proxies are not; use an http:// or https:// proxy)"
	case nd.Stage == transport.StageProxy && strings.Contains(err.Error(), "proxy refused CONNECT: "):
		_, status, _ := strings.Cut(err.Error(), "proxy refused CONNECT: ")
		return "the proxy answered " + status
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, transport.ErrConnectTimeout):
		return "no connection within the connect budget"
	default:
		return err.Error()
	}
}

// client returns a Bot API client for token configured by b, refusing a
// malformed token before any call; it reads at most maxResponse bytes per
// answer (0: the default).
func (b botAPIConfig) client(flagName, token string, maxResponse int64) (*botapi.Client, error) {
	if err := checkToken(flagName, token); err != nil {
		return nil, err
	}
	hc, err := b.httpClient(maxResponse)
	if err != nil {
		return nil, err
	}
	c, err := botapi.New(token, botapi.Config{APIRoot: b.root, HTTPClient: hc, MaxResponseBytes: maxResponse})
	if errors.Is(err, botapi.ErrInvalidToken) {
		return nil, checkToken(flagName, "")
	}
	if err != nil {
		return nil, fmt.Errorf("bot API client: %w", err)
	}
	return c, nil
}
