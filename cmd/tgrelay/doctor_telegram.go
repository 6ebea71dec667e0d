package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/transport"
)

// recentHookError is how old Telegram's last delivery error may be and
// still count as the current state of the webhook (a failure): Telegram
// retries a failing update for a while, so an error of the last hour means
// deliveries fail now or failed until just now.
const recentHookError = time.Hour

// apiRoot is the Bot API root serve uses.
func (d *doctor) apiRoot() string {
	if d.o.apiRoot != "" {
		return d.o.apiRoot
	}
	return botapi.DefaultAPIRoot
}

// checkProxy names the proxy the Bot API calls go through and checks that
// it accepts connections.
func (d *doctor) checkProxy(ctx context.Context) {
	const check = "proxy"
	target, err := url.Parse(d.apiRoot())
	if err != nil || target.Host == "" {
		d.skip(check, "--api-root is not a URL (see settings)")
		return
	}
	var proxy *url.URL
	var from string
	switch d.o.net.proxy {
	case "none":
		d.ok(check, "none: a direct connection (--proxy none)")
		return
	case "":
		cfg := httpproxy.Config{
			HTTPProxy:  firstEnv(d.env.getenv, "HTTP_PROXY", "http_proxy"),
			HTTPSProxy: firstEnv(d.env.getenv, "HTTPS_PROXY", "https_proxy"),
			NoProxy:    firstEnv(d.env.getenv, "NO_PROXY", "no_proxy"),
		}
		proxy, err = cfg.ProxyFunc()(target)
		from = "the proxy environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY)"
		if err != nil {
			d.fail(check, "the proxy environment variables do not parse: "+err.Error(),
				"fix HTTPS_PROXY (http://host:port), or pass --proxy none for a direct connection")
			return
		}
	default:
		proxy, err = url.Parse(d.o.net.proxy)
		from = "--proxy"
		if err != nil || proxy.Host == "" {
			d.fail(check, "--proxy is not a URL", "give --proxy as http://host:port or https://host:port")
			return
		}
	}
	if proxy == nil {
		d.ok(check, "none: a direct connection to "+target.Host+" (no proxy variable applies)")
		return
	}
	shown := proxy.Scheme + "://" + proxy.Host // never the credentials
	switch proxy.Scheme {
	case "http", "https":
	default:
		d.fail(check, fmt.Sprintf("%s names a %s proxy (%s), which tgrelay does not support", from, proxy.Scheme, shown),
			"use an HTTP CONNECT proxy (http:// or https://), or --proxy none for a direct connection")
		return
	}
	port := proxy.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[proxy.Scheme]
	}
	pctx, cancel := d.probe(ctx)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(pctx, "tcp", net.JoinHostPort(proxy.Hostname(), port))
	if err != nil {
		d.fail(check, fmt.Sprintf("the proxy %s from %s does not accept connections: %s", shown, from, dialCause(err)),
			"start the proxy or fix its address; or pass --proxy none (or unset the variable) for a direct connection")
		return
	}
	_ = conn.Close()
	d.ok(check, fmt.Sprintf("%s, from %s, accepts connections", shown, from))
}

func firstEnv(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// dialCause says in words why a dial failed.
func dialCause(err error) string {
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host " + dns.Name
	case errors.As(err, &dns):
		return "the name did not resolve (" + dns.Err + ")"
	case isRefused(err):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "no answer within " + doctorProbeTimeout.String() + " (a firewall dropping packets?)"
	default:
		return err.Error()
	}
}

// checkToken calls getMe.
func (d *doctor) checkToken(ctx context.Context) {
	const check = "token"
	if d.o.token == "" {
		d.fail(check, "no bot token: serve would run against its built-in sandbox, not Telegram",
			"set TGRELAY_TOKEN to the token @BotFather gave (in the environment file, not on the command line)")
		return
	}
	if err := checkToken("--token", d.o.token); err != nil {
		d.fail(check, err.Error(), "copy the token from @BotFather again: <bot id>:<secret>")
		return
	}
	api, err := d.o.net.botAPI(d.o.apiRoot)
	var c *botapi.Client
	if err == nil {
		c, err = api.client("--token", d.o.token, relay.BotAPIMaxResponseBytes)
	}
	if err != nil {
		d.fail(check, "the Bot API client cannot be set up: "+err.Error(), "fix --proxy, --ca-file or --timeout")
		return
	}
	pctx, cancel := d.probe(ctx)
	defer cancel()
	raw, err := c.Call(pctx, "getMe", struct{}{})
	if err != nil {
		what, fix := botCallProblem("getMe", err)
		d.fail(check, what, fix)
		return
	}
	var me struct {
		ID       int64  `json:"id"`
		Username string `json:"username"`
	}
	_ = json.Unmarshal(raw, &me)
	d.bot = c
	d.ok(check, fmt.Sprintf("Telegram knows the bot: @%s (id %d)", me.Username, me.ID))
}

// botCallProblem explains a failed Bot API call and what to do.
func botCallProblem(method string, err error) (what, fix string) {
	if ae, ok := errors.AsType[*botapi.APIError](err); ok {
		switch {
		case ae.NotJSON:
			return fmt.Sprintf("%s was answered %d by something that is not Telegram (%s)", method, ae.Code, ae.Description),
				"check --api-root and the proxy: a proxy or captive portal answers instead of Telegram"
		case ae.Code == 401 || ae.Code == 404:
			return fmt.Sprintf("Telegram refuses the token: %s answered %d %s", method, ae.Code, ae.Description),
				"the token was revoked or mistyped: get the current one from @BotFather (/mybots, API Token) and set TGRELAY_TOKEN"
		default:
			return fmt.Sprintf("Telegram refused %s: %d %s", method, ae.Code, ae.Description), "see Telegram's description"
		}
	}
	if nd, ok := errors.AsType[*transport.NotDispatchedError](err); ok {
		return fmt.Sprintf("%s never reached Telegram: %s", method, notDispatchedCause(nd)),
			"check DNS, outgoing HTTPS to api.telegram.org through the firewall, and the proxy (--proxy, HTTPS_PROXY)"
	}
	return fmt.Sprintf("%s got no answer: %v", method, err),
		"check the network path to Telegram (or --api-root) and the proxy; raise --timeout on a slow link"
}

// webhookInfo is getWebhookInfo's answer.
type webhookInfo struct {
	URL                  string   `json:"url"`
	HasCustomCertificate bool     `json:"has_custom_certificate"`
	PendingUpdateCount   int      `json:"pending_update_count"`
	IPAddress            string   `json:"ip_address"`
	LastErrorDate        int64    `json:"last_error_date"`
	LastErrorMessage     string   `json:"last_error_message"`
	MaxConnections       int      `json:"max_connections"`
	AllowedUpdates       []string `json:"allowed_updates"`
}

// checkWebhook reads getWebhookInfo and reports its parts.
func (d *doctor) checkWebhook(ctx context.Context) {
	const check = "webhook"
	if d.bot == nil {
		d.skip(check, "not checked: Telegram did not answer getMe (see token)")
		return
	}
	pctx, cancel := d.probe(ctx)
	defer cancel()
	raw, err := d.bot.Call(pctx, "getWebhookInfo", struct{}{})
	if err != nil {
		what, fix := botCallProblem("getWebhookInfo", err)
		d.fail(check, what, fix)
		return
	}
	var in webhookInfo
	if err := json.Unmarshal(raw, &in); err != nil {
		d.fail(check, "getWebhookInfo answered an unexpected shape", "check --api-root: it must be the Bot API")
		return
	}
	d.info = &in
	if d.o.poll {
		if in.URL != "" {
			d.fail(check, fmt.Sprintf("a webhook is set (host %s), so getUpdates fails: serve --poll receives nothing", hostOnly(in.URL)),
				"run 'tgrelay webhook delete' (with that webhook's secret, or --takeover-from its host), or run serve without --poll")
		} else {
			d.ok(check, "no webhook is set, as long polling needs")
		}
		d.checkPending(in, false)
		return
	}
	d.checkWebhookURL(in)
	recent := d.checkLastError(in)
	d.checkPending(in, recent)
	d.checkAllowedUpdates(in)
	d.checkMaxConnections(in)
	if in.IPAddress != "" {
		d.ok(check, "Telegram delivers to IP address "+in.IPAddress)
	}
}

// checkWebhookURL compares the registered webhook with --public-url and
// this secret's owner tag.
func (d *doctor) checkWebhookURL(in webhookInfo) {
	const check = "webhook"
	tag, tagErr := hookowner.OwnerTag(d.o.secret)
	if d.o.publicURL == "" {
		if in.URL == "" {
			d.fail(check, "no webhook is set and serve has no --public-url, so Telegram sends the updates nowhere",
				"give serve --public-url, the HTTPS address Telegram should post to (serve sets the webhook on start; the first time with --takeover-from none)")
			return
		}
		d.hookURL = in.URL
		if tagErr == nil && ownerTag(in.URL) == tag {
			d.ok(check, fmt.Sprintf("the webhook (host %s) carries this secret's owner tag", hostOnly(in.URL)))
			return
		}
		d.warn(check, fmt.Sprintf("the webhook (host %s) was set by something else than serve with this secret; serve has no --public-url, so it does not claim or watch it", hostOnly(in.URL)),
			"give serve --public-url so it sets the webhook with its secret and warns when it moves")
		return
	}
	d.hookURL = d.o.publicURL
	tagged, err := hookowner.TaggedURL(d.o.publicURL, d.o.secret)
	if err != nil {
		d.fail(check, "--public-url or the secret is invalid: "+err.Error(), "fix --public-url (an absolute https URL) and TGRELAY_WEBHOOK_SECRET")
		return
	}
	switch {
	case in.URL == tagged:
		d.hookURL = tagged
		d.ok(check, fmt.Sprintf("the webhook is --public-url with this secret's owner tag %s", tag))
	case in.URL == "":
		d.fail(check, "no webhook is set: Telegram holds the updates and posts them nowhere",
			"start serve: with --public-url it sets the webhook (for a bot without one, pass --takeover-from none once)")
	case withoutOwnerTag(in.URL) == withoutOwnerTag(tagged):
		d.fail(check, "the webhook is --public-url but was set with another secret, so serve answers Telegram 403",
			fmt.Sprintf("restart serve with this TGRELAY_WEBHOOK_SECRET and --takeover-from %s (once), or use the secret the webhook was set with", hostOnly(in.URL)))
	default:
		d.fail(check, fmt.Sprintf("the webhook points to host %s, not to --public-url (host %s)", hostOnly(in.URL), hostOnly(d.o.publicURL)),
			fmt.Sprintf("stop whatever uses that webhook, then start serve with --takeover-from %s (once)", hostOnly(in.URL)))
	}
}

// checkLastError explains getWebhookInfo's last delivery error. It reports
// whether that error is recent.
func (d *doctor) checkLastError(in webhookInfo) bool {
	const check = "webhook"
	if in.LastErrorMessage == "" {
		d.ok(check, "Telegram reports no delivery error")
		return false
	}
	at := time.Unix(in.LastErrorDate, 0)
	age := d.env.now().Sub(at).Round(time.Second)
	plain, fix := explainHookError(in.LastErrorMessage)
	what := fmt.Sprintf("Telegram's last delivery failed %s ago with %q: %s", age, in.LastErrorMessage, plain)
	switch {
	case in.LastErrorDate == 0 || age < recentHookError:
		d.fail(check, what, fix)
		return true
	case in.PendingUpdateCount > 0:
		d.warn(check, what+"; updates still wait", fix)
	default:
		d.ok(check, fmt.Sprintf("the last delivery error is old (%s ago, %q) and no update waits", age, in.LastErrorMessage))
	}
	return false
}

// checkPending reports the updates Telegram holds.
func (d *doctor) checkPending(in webhookInfo, failing bool) {
	const check = "webhook"
	n := in.PendingUpdateCount
	switch {
	case n == 0:
		d.ok(check, "no update waits at Telegram")
	case failing:
		d.warn(check, fmt.Sprintf("%d update(s) wait at Telegram, which cannot deliver them (above)", n),
			"fix the delivery error: Telegram keeps undelivered updates for 24 hours")
	case d.o.poll:
		d.ok(check, fmt.Sprintf("%d update(s) wait for getUpdates", n))
	default:
		d.ok(check, fmt.Sprintf("%d update(s) wait at Telegram, being delivered", n))
	}
}

// checkAllowedUpdates compares Telegram's allowed_updates with serve's.
func (d *doctor) checkAllowedUpdates(in webhookInfo) {
	const check = "webhook"
	want := d.o.allowed()
	got := in.AllowedUpdates
	show := func(l []string) string {
		if len(l) == 0 {
			return "Telegram's default (every type but chat_member, message_reaction and message_reaction_count)"
		}
		return strings.Join(l, ",")
	}
	switch {
	case want == nil:
		d.ok(check, "allowed_updates: "+show(got)+"; serve has no --allowed-updates, so it keeps them")
	case sameSet(want, got):
		d.ok(check, "allowed_updates: "+show(got)+", as --allowed-updates says")
	default:
		d.warn(check, fmt.Sprintf("allowed_updates is %s, but --allowed-updates says %s", show(got), show(want)),
			"restart serve: it sends --allowed-updates when it sets the webhook on start")
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// checkMaxConnections compares Telegram's max_connections with serve's.
func (d *doctor) checkMaxConnections(in webhookInfo) {
	const check = "webhook"
	if d.o.maxConnections != 0 && in.MaxConnections != d.o.maxConnections {
		d.warn(check, fmt.Sprintf("max_connections is %d, but --max-connections says %d", in.MaxConnections, d.o.maxConnections),
			"restart serve: it sends --max-connections when it sets the webhook on start")
		return
	}
	d.ok(check, fmt.Sprintf("max_connections: %d", in.MaxConnections))
}

// hostOnly returns the host of a webhook address: messages name hosts only,
// since a path may itself be a secret.
func hostOnly(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return hookowner.HostUnknown
	}
	return u.Host
}

// ownerTag returns the owner parameter of a webhook address.
func ownerTag(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Query().Get(hookowner.OwnerParam)
}

// withoutOwnerTag returns raw without its owner parameter.
func withoutOwnerTag(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Del(hookowner.OwnerParam)
	u.RawQuery = q.Encode()
	return u.String()
}
