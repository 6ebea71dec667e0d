package main

import (
	"strconv"
	"strings"
)

// hookErrorHelp explains one kind of getWebhookInfo last_error_message.
type hookErrorHelp struct {
	// match reports whether a message (in lower case) is of this kind.
	match func(msg string) bool
	// plain says what happened, fix what to do.
	plain, fix string
}

func contains(parts ...string) func(string) bool {
	return func(msg string) bool {
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				return false
			}
		}
		return true
	}
}

// hookErrors are the last_error_message texts Telegram is known to report,
// most specific first. The texts are Telegram's; the match is on the
// words that do not vary (a status, an OpenSSL error code).
var hookErrors = []hookErrorHelp{
	{contains("connection refused"),
		"Telegram reached the host, but nothing listens on the port",
		"start serve (or the TLS proxy in front of it) on the public URL's port, and make the firewall or router forward that port to it"},
	{contains("timed out"),
		"Telegram's connection got no answer at all: a firewall drops the packets, or the host's address is wrong",
		"open the port to Telegram's networks (149.154.160.0/20 and 91.108.4.0/22) and check the DNS record points to this server"},
	{contains("read timeout expired"),
		"Telegram connected and sent the update, but no answer came in time",
		"serve answers once the update is stored: check serve's log and the store (a locked or slow database), or a proxy in front that holds requests"},
	{contains("wrong version number"),
		"Telegram spoke HTTPS, and the port answered plain HTTP",
		"serve HTTPS on that port (serve --tls-cert/--tls-key, --acme or --self-signed), or put a TLS proxy in front"},
	{contains("certificate verify failed"),
		"Telegram does not trust the certificate: self-signed and not uploaded, issued by an unknown authority, missing its intermediate certificates, expired, or for another name",
		"serve the full chain (fullchain.pem, not cert.pem), or use serve --acme for a certificate from Let's Encrypt, or serve --self-signed, which uploads its certificate with setWebhook"},
	{contains("ssl error"),
		"the TLS handshake with Telegram failed (no certificate for the name Telegram asked for, or no protocol in common)",
		"serve a certificate for the public URL's host over TLS 1.2 or later; 'tgrelay doctor' checks the certificate under public-url"},
	{contains("wrong response", "401"),
		"the webhook answered 401: it refused Telegram's secret",
		"serve and the registered webhook use different secrets: restart serve with --public-url so it sets the webhook with its own secret"},
	{contains("wrong response", "403"),
		"the webhook answered 403: serve refused the secret Telegram sent",
		"the webhook was set with another secret than serve's TGRELAY_WEBHOOK_SECRET: restart serve with --public-url (and --takeover-from once) so it sets the webhook with its own"},
	{contains("wrong response", "404"),
		"the webhook answered 404: the URL's path is not serve's webhook",
		"make the public URL's path equal serve's --path (default /telegram), or fix the route in the proxy in front"},
	{contains("wrong response", "405"),
		"the webhook answered 405: something other than serve's webhook answers at that URL",
		"point the webhook at serve's --path, or fix the proxy in front"},
	{contains("wrong response", "413"),
		"the webhook answered 413: the update was larger than allowed",
		"raise the body limit of the proxy in front (serve takes up to 1 MiB)"},
	{contains("wrong response", "503"),
		"the webhook answered 503: serve could not store the update (or a proxy has no backend), so Telegram retries",
		"check the store (tgrelay doctor's store check, serve's /readyz and its log)"},
	{contains("wrong response", "502"),
		"the webhook answered 502: a proxy in front could not reach serve",
		"start serve, and check the proxy's upstream address equals serve's --listen"},
	{contains("wrong response", "504"),
		"the webhook answered 504: a proxy in front timed out waiting for serve",
		"check that serve runs and answers, and the proxy's upstream address equals serve's --listen"},
	{contains("wrong response"),
		"the webhook answered with a status other than 2xx",
		"look at the status: serve answers 200 once stored, 400 to a body that is not an update, 403 to a wrong secret, 503 when its store fails"},
	{contains("failed to resolve host"),
		"Telegram cannot resolve the public URL's host name",
		"create the DNS record (A or AAAA) for the host, public, not only on this network; wait for it to propagate"},
	{contains("ports 80, 88, 443 or 8443"),
		"Telegram delivers webhooks only to ports 443, 80, 88 and 8443",
		"use one of them in --public-url (443 is usual) and listen on it, or forward it to serve"},
	{contains("reserved"),
		"the host resolves to a private or reserved IP address, which Telegram does not post to",
		"publish a public address for the host (or pass the public IP in the URL)"},
	{contains("connection reset"),
		"the connection was reset while Telegram sent or waited: a firewall, or a TLS terminator that rejected it",
		"check what listens on the public port and its log; the TLS settings of a proxy in front"},
	{contains("https url must be provided"),
		"Telegram posts webhooks only over HTTPS",
		"use an https:// --public-url and serve HTTPS (serve --tls-cert/--tls-key, --acme or --self-signed)"},
}

// explainHookError returns what a last_error_message means and the fix.
// Unknown messages get a generic answer that still points somewhere.
func explainHookError(msg string) (plain, fix string) {
	low := strings.ToLower(msg)
	for _, h := range hookErrors {
		if h.match(low) {
			return h.plain, h.fix
		}
	}
	return "Telegram could not deliver to the webhook",
		"the public-url and secret checks below show the likely cause; " + strconv.Quote(msg) + " is Telegram's own word for it"
}
