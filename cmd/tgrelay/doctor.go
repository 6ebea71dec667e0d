package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

const doctorHelp = `
Usage: tgrelay doctor [--json] [serve's flags]

Doctor checks a deployment of 'tgrelay serve' from where it runs and says,
for each finding, what to do. It takes serve's flags and environment
variables (TGRELAY_TOKEN, TGRELAY_WEBHOOK_SECRET, TGRELAY_PUBLIC_URL,
TGRELAY_DB, TGRELAY_FORWARD, ...), so it runs with serve's own environment
file, as the user serve runs as:

  sudo -u tgrelay sh -c 'set -a; . /etc/tgrelay/tgrelay.env; exec tgrelay doctor'

The checks, in order:
  settings     serve's flags are valid together
  proxy        the proxy for the Bot API (--proxy, or HTTPS_PROXY and the
               other proxy variables) accepts connections
  token        Telegram answers getMe with the bot
  webhook      getWebhookInfo: the webhook is --public-url tagged with this
               secret's owner tag (with --poll: no webhook is set); its last
               delivery error in plain words with the fix; the updates
               Telegram holds; allowed_updates and max_connections against
               serve's flags; the IP address Telegram delivers to
  public-url   (webhook) its host resolves, to the IP Telegram uses; its port
               is one Telegram delivers to (443, 80, 88 or 8443); it speaks
               HTTPS with a certificate valid for its host, not expiring
               soon, and trusted by this system's roots (as Telegram's are
               public CAs), or self-signed and uploaded with setWebhook
  secret       serve's webhook at the public URL refuses a wrong secret and
               takes this one: the probe's body is empty, so serve answers
               400 after its secret check and records nothing (the secret is
               sent only over a connection Telegram itself would trust)
  app          --forward and --exhaustion-forward accept connections
  gateway      (--gateway-listen) the gateway answers getMe through itself
  store        --db exists, has this tgrelay's schema version and is
               writable; with PostgreSQL, this host's clock is within
               --max-clock-skew of the database's
A check that an earlier failure makes pointless is skipped. Doctor changes
nothing: it never sets the webhook, creates or migrates the database, or
records an update (the secret probe counts as one invalid webhook request in
serve's metrics; the SQLite check creates and removes a temporary file beside
the database to test its directory). Run it as serve's user: permissions are
checked for the user that runs it.

Output: one line per finding, "ok", "warn" or "fail", the check, what was
found and, after "->", what to do. --json prints one JSON object instead:
{"version": ..., "worst": ..., "findings": [{"check", "status", "what",
"fix"}]}. The token and the secrets never appear in either.

Exit status: 0 when every finding is ok (or skipped), 1 when the worst is a
warning, 2 when a check failed or the command line is wrong.
`

// Finding statuses, from best to worst.
const (
	statusOK   = "ok"
	statusSkip = "skip"
	statusWarn = "warn"
	statusFail = "fail"
)

// Exit codes of doctor by its worst finding.
const (
	exitDoctorWarn = 1
	exitDoctorFail = 2
)

// doctorProbeTimeout bounds each network probe of doctor (a dial, a TLS
// handshake, a request).
const doctorProbeTimeout = 10 * time.Second

// finding is one result of doctor: a check, its status, what was found and,
// unless it is ok, what to do.
type finding struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	What   string `json:"what"`
	Fix    string `json:"fix,omitempty"`
}

// doctorReport is doctor's whole answer, as --json prints it.
type doctorReport struct {
	Version  string    `json:"version"`
	Worst    string    `json:"worst"`
	Findings []finding `json:"findings"`
}

// rank orders statuses: a higher rank is worse.
func rank(status string) int {
	switch status {
	case statusWarn:
		return 2
	case statusFail:
		return 3
	default:
		return 0
	}
}

// worst returns the worst status among fs (ok when there are none).
func worst(fs []finding) string {
	w := statusOK
	for _, f := range fs {
		if rank(f.Status) > rank(w) {
			w = f.Status
		}
	}
	return w
}

// doctorExit is doctor's outcome when a finding is not ok: its ExitCode
// follows the worst finding.
type doctorExit struct {
	warns, fails int
}

func (e *doctorExit) Error() string {
	return fmt.Sprintf("%d failed, %d warning(s)", e.fails, e.warns)
}

// ExitCode is exitDoctorFail when a check failed, else exitDoctorWarn.
func (e *doctorExit) ExitCode() int {
	if e.fails > 0 {
		return exitDoctorFail
	}
	return exitDoctorWarn
}

// doctorEnv is what doctor takes from the world besides its flags; tests
// replace parts of it.
type doctorEnv struct {
	// now is the clock of certificate expiry and error ages.
	now func() time.Time
	// lookupHost resolves a host name as Telegram would (net.Resolver's).
	lookupHost func(ctx context.Context, host string) ([]string, error)
	// roots are the certificate authorities Telegram trusts, nil meaning
	// this system's roots.
	roots *x509.CertPool
	// ports are the ports Telegram delivers webhooks to.
	ports []string
	// getenv reads the proxy variables.
	getenv func(string) string
	// timeout bounds each probe.
	timeout time.Duration
	// privateOK accepts a public URL whose host has only private or
	// loopback addresses (tests on loopback); Telegram does not.
	privateOK bool
}

// telegramWebhookPorts are the only ports Telegram posts webhooks to.
var telegramWebhookPorts = []string{"443", "80", "88", "8443"}

func defaultDoctorEnv() doctorEnv {
	return doctorEnv{
		now:        time.Now,
		lookupHost: net.DefaultResolver.LookupHost,
		ports:      telegramWebhookPorts,
		getenv:     os.Getenv,
		timeout:    doctorProbeTimeout,
	}
}

// runDoctor runs `tgrelay doctor`: serve's flags and environment, plus
// --json.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	o := defineServeFlags(fs)
	asJSON := fs.Bool("json", false, "print the findings as one JSON object")
	fs.Usage = commandUsage(fs, doctorHelp)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	warnUnknownEnv(stderr, "doctor", os.Environ())
	lookup := func(name string) (string, bool) {
		if name == envName("json") {
			return "", false // --json is doctor's own, not serve's
		}
		return os.LookupEnv(name)
	}
	if err := applyEnv(fs, lookup); err != nil {
		return withHint(err, "Run 'tgrelay help doctor' for usage.")
	}
	rep := diagnose(ctx, o, defaultDoctorEnv())
	if err := writeDoctorReport(stdout, rep, *asJSON); err != nil {
		return err
	}
	e := &doctorExit{}
	for _, f := range rep.Findings {
		switch f.Status {
		case statusWarn:
			e.warns++
		case statusFail:
			e.fails++
		}
	}
	if e.warns+e.fails == 0 {
		return nil
	}
	return e
}

// writeDoctorReport prints rep as lines, or as JSON.
func writeDoctorReport(w io.Writer, rep doctorReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", rep.Version)
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "%-4s  %-10s  %s", f.Status, f.Check, f.What)
		if f.Fix != "" {
			fmt.Fprintf(&b, " -> %s", f.Fix)
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// doctor is one run of the checks.
type doctor struct {
	o   *serveOptions
	env doctorEnv
	red *botapi.Redactor
	out []finding

	// Set by earlier checks for later ones.
	bot  *botapi.Client
	info *webhookInfo
	// hookURL is the webhook address to check: --public-url, or the one
	// registered when serve was given none.
	hookURL string
	// trusted reports that the public URL's TLS (or plain HTTP) is one
	// Telegram would post over, so the secret may be sent to it.
	trusted bool
	// tlsPin is the certificate to trust for the secret probe when it is a
	// self-signed one Telegram was given.
	tlsPin *x509.Certificate
}

// diagnose runs every check against the deployment o describes.
func diagnose(ctx context.Context, o *serveOptions, env doctorEnv) doctorReport {
	d := &doctor{o: o, env: env, red: &botapi.Redactor{}}
	d.red.Add(o.token, o.secret, o.adminToken, o.appSecret)
	for _, raw := range []string{o.db, o.net.proxy, o.forwardURL, o.exhaustionURL} {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			pw, _ := u.User.Password()
			d.red.Add(pw) // credentials in URLs never reach a finding either
		}
	}
	d.checkSettings()
	d.checkProxy(ctx)
	d.checkToken(ctx)
	d.checkWebhook(ctx)
	d.checkPublicURL(ctx)
	d.checkSecret(ctx)
	d.checkApp(ctx)
	d.checkGateway(ctx)
	d.checkStore(ctx)
	return doctorReport{Version: versionString(), Worst: worst(d.out), Findings: d.out}
}

// add records a finding, masking the token and the secrets in its text and
// keeping it on one line (errors of some libraries span several).
func (d *doctor) add(check, status, what, fix string) {
	oneLine := func(s string) string { return strings.Join(strings.Fields(d.red.Redact(s)), " ") }
	d.out = append(d.out, finding{Check: check, Status: status, What: oneLine(what), Fix: oneLine(fix)})
}

func (d *doctor) ok(check, what string)        { d.add(check, statusOK, what, "") }
func (d *doctor) skip(check, what string)      { d.add(check, statusSkip, what, "") }
func (d *doctor) warn(check, what, fix string) { d.add(check, statusWarn, what, fix) }
func (d *doctor) fail(check, what, fix string) { d.add(check, statusFail, what, fix) }
func (d *doctor) probe(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.env.timeout)
}

// checkSettings validates serve's flags together, as serve does before it
// opens anything.
func (d *doctor) checkSettings() {
	if err := d.o.validate(); err != nil {
		msg := err.Error()
		if ue, ok := errors.AsType[*usageError](err); ok {
			msg = ue.msg
		}
		d.fail("settings", "serve would refuse these settings: "+msg, "fix the flag or its TGRELAY_ variable; 'tgrelay help serve' lists them")
		return
	}
	mode := "webhook"
	if d.o.poll {
		mode = "long polling (--poll)"
	}
	d.ok("settings", "serve accepts these settings; receiving by "+mode)
}
