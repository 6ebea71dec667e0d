package botapi

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// WebhookPorts are the ports Telegram delivers webhooks to; setWebhook
// refuses an address on any other.
var WebhookPorts = [...]int{443, 80, 88, 8443}

// ErrWebhookNotHTTPS reports a webhook address that is not https: Telegram
// delivers updates only over TLS.
var ErrWebhookNotHTTPS = errors.New("botapi: a webhook address must be an https URL")

// ErrWebhookPort reports a webhook address on a port Telegram does not
// deliver to.
var ErrWebhookPort = errors.New("botapi: Telegram delivers webhooks only to ports 443, 80, 88 or 8443")

// WebhookPort returns the port of a webhook address: its explicit port, or
// 443 for https and 80 for http when it has none. It is the one home of that
// rule; see [CheckWebhookURL] for the whole check.
func WebhookPort(u *url.URL) (int, error) {
	p := u.Port()
	if p == "" {
		switch u.Scheme {
		case "https":
			return 443, nil
		case "http":
			return 80, nil
		}
		return 0, fmt.Errorf("botapi: no port for scheme %q", u.Scheme)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("botapi: bad port %q", p)
	}
	return n, nil
}

// ValidWebhookPort reports whether Telegram delivers webhooks to port.
func ValidWebhookPort(port int) bool {
	for _, p := range WebhookPorts {
		if p == port {
			return true
		}
	}
	return false
}

// CheckWebhookURL reports whether Telegram would deliver to raw: an
// absolute https URL with a host, on one of [WebhookPorts]. Its errors wrap
// [ErrWebhookNotHTTPS] or [ErrWebhookPort] and name the port found. It
// makes no network call.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return errors.New("botapi: a webhook address must be an absolute https URL with a host")
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%w (got %s://)", ErrWebhookNotHTTPS, u.Scheme)
	}
	port, err := WebhookPort(u)
	if err != nil {
		return err
	}
	if !ValidWebhookPort(port) {
		return fmt.Errorf("%w (got %d)", ErrWebhookPort, port)
	}
	return nil
}

// WebhookHostIsIP reports whether a webhook address names its host by IP
// address (then only a certificate issued for that IP, such as a
// self-signed one uploaded with setWebhook, can match it).
func WebhookHostIsIP(u *url.URL) bool {
	return net.ParseIP(u.Hostname()) != nil
}
