package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/transport"
)

// Exit codes of `tgrelay send`, one per outcome of the call. 1 (an error
// before any call, such as a bad token) and 2 (usage) are run's.
const (
	// exitSendAnswered: Telegram accepted the message (exitOK).
	exitSendAnswered = exitOK
	// exitSendRefused: Telegram answered with a refusal.
	exitSendRefused = 3
	// exitSendNotDispatched: no byte of the request left this process;
	// sending again cannot duplicate the message.
	exitSendNotDispatched = 4
	// exitSendUnknown: the request may have arrived; do not repeat blindly.
	exitSendUnknown = 5
)

// Environment variables read by the commands that call the Bot API.
const (
	envToken         = "TGRELAY_TOKEN"
	envWebhookSecret = "TGRELAY_WEBHOOK_SECRET"
)

// maxSendText bounds --text before anything is sent (Telegram's limit is 4096
// UTF-16 units of visible text; markup may add more, Telegram decides).
const maxSendText = 64 << 10

const sendHelp = `
Usage: tgrelay send --chat ID --text T [--html] [--token T] [--api-root URL]
                    [--proxy URL] [--ca-file FILE] [--timeout D]

Send sends one message through tgrelay's dispatch-aware transport and says
honestly what became of it:

  answered        Telegram accepted it; prints the message id      exit 0
  refused         Telegram refused it; prints the reason           exit 3
  not dispatched  no byte left this process; safe to send again    exit 4
  unknown         it may have arrived; never repeat it blindly     exit 5

Exit 2 is a usage error, found before any call: a bad flag, a missing
token, or a token without the <bot id>:<secret> shape BotFather gives. Exit
1 is another error before any call (such as an unreadable --ca-file). The
token comes from --token or, better (it stays out of the process list), the
TGRELAY_TOKEN environment variable; it never appears in the output.

A not-dispatched outcome names its cause: no such host, a certificate not
trusted (--ca-file adds a private CA), a proxy's refusal (--proxy, or
HTTPS_PROXY from the environment; SOCKS proxies are not supported), a
refused connection.
`

// botFlags are the flags of the commands that call the Bot API.
type botFlags struct {
	token   string
	apiRoot string
	netFlags
}

func (b *botFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.token, "token", "", "bot `token` (default $"+envToken+")")
	fs.StringVar(&b.apiRoot, "api-root", botapi.DefaultAPIRoot, "Bot API root `URL` (a local Bot API server, or `tgrelay sandbox`)")
	b.netFlags.register(fs)
}

// client returns a Bot API client over tgrelay's transport. A missing or
// malformed token, and a bad --api-root, --proxy, --ca-file or --timeout,
// are usage errors, before any call.
func (b *botFlags) client(cmd string) (*botapi.Client, error) {
	hint := "Run 'tgrelay help " + cmd + "' for usage."
	token := b.token
	if token == "" {
		token = os.Getenv(envToken)
	}
	if token == "" {
		return nil, &usageError{msg: "no bot token", hint: "Set " + envToken + " or pass --token."}
	}
	if err := checkToken("--token", token); err != nil {
		return nil, withHint(err, hint)
	}
	if err := checkAPIRootFlag(b.apiRoot); err != nil {
		return nil, withHint(err, hint)
	}
	bc, err := b.botAPI(b.apiRoot)
	if err != nil {
		return nil, withHint(err, hint)
	}
	return bc.client("--token", token, 0)
}

// withHint adds hint to a usage error that has none.
func withHint(err error, hint string) error {
	if ue, ok := errors.AsType[*usageError](err); ok && ue.hint == "" {
		ue.hint = hint
	}
	return err
}

// checkAPIRootFlag refuses an --api-root that the Bot API client would
// refuse ([configerr.BaseURL]: not an absolute http or https URL, or one
// with a user, a query or a fragment, as a method's path is appended to
// the root). It never quotes the value.
func checkAPIRootFlag(raw string) error {
	if _, err := configerr.BaseURL(raw); err != nil {
		return &usageError{msg: "--api-root " + err.Error() + ", such as https://api.telegram.org"}
	}
	return nil
}

// exitCodeError ends a command with a specific exit code after the command
// has printed its outcome. ExitCode is what run should return.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }

// ExitCode returns the process exit code for this outcome.
func (e *exitCodeError) ExitCode() int { return e.code }

func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	var bf botFlags
	bf.register(fs)
	chat := fs.String("chat", "", "chat `id` (a number, or @channelusername)")
	text := fs.String("text", "", "message `text`")
	html := fs.Bool("html", false, "send the text with parse_mode HTML")
	fs.Usage = commandUsage(fs, sendHelp)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	warnUnknownEnv(stderr, "send", os.Environ())
	hint := "Run 'tgrelay help send' for usage."
	if *chat == "" || *text == "" {
		return &usageError{msg: "--chat and --text are required", hint: hint}
	}
	if len(*text) > maxSendText {
		return &usageError{msg: fmt.Sprintf("--text is longer than %d bytes", maxSendText), hint: hint}
	}
	params := map[string]any{"text": *text}
	if id, err := strconv.ParseInt(*chat, 10, 64); err == nil {
		params["chat_id"] = id
	} else if len(*chat) > 1 && (*chat)[0] == '@' {
		params["chat_id"] = *chat
	} else {
		return &usageError{msg: fmt.Sprintf("--chat %q is neither a number nor an @username", *chat), hint: hint}
	}
	if *html {
		params["parse_mode"] = "HTML"
	}
	c, err := bf.client("send")
	if err != nil {
		return err
	}
	res, err := c.Call(ctx, "sendMessage", params)
	o := sendOutcome(res, err)
	fmt.Fprintln(stdout, c.Redact(o.line))
	if o.code == exitSendAnswered {
		return nil
	}
	return &exitCodeError{code: o.code, msg: o.summary}
}

// outcome is one of send's four outcomes.
type outcome struct {
	code    int
	line    string // printed to stdout
	summary string // the error run prints to stderr
}

// sendOutcome classifies the result of one sendMessage call.
func sendOutcome(res json.RawMessage, err error) outcome {
	if err == nil {
		var m struct {
			MessageID int64 `json:"message_id"`
		}
		if json.Unmarshal(res, &m) != nil || m.MessageID == 0 {
			// Telegram answered ok but not with a message: it arrived,
			// yet what became of it is not what we know how to read.
			return outcome{exitSendAnswered, "answered: ok (no message id in the result)", ""}
		}
		return outcome{exitSendAnswered, fmt.Sprintf("answered: message_id %d", m.MessageID), ""}
	}
	f := botapi.Classify(err)
	var nd *transport.NotDispatchedError
	if errors.As(err, &nd) {
		cause := notDispatchedCause(nd)
		return outcome{exitSendNotDispatched,
			fmt.Sprintf("not dispatched (stage %s: %s): no byte of the request left; sending again cannot duplicate it", nd.Stage, cause),
			"not dispatched: " + cause}
	}
	var ae *botapi.APIError
	if errors.As(err, &ae) && !ae.NotJSON {
		line := fmt.Sprintf("refused: %s (%d %s)", f.Reason, ae.Code, ae.Description)
		if f.RetryAfter > 0 {
			line += fmt.Sprintf("; retry after %s", f.RetryAfter)
		}
		if f.MigrateToChatID != 0 {
			line += fmt.Sprintf("; the chat is now %d", f.MigrateToChatID)
		}
		if f.RecipientUnreachable {
			line += "; the recipient is unreachable"
		}
		return outcome{exitSendRefused, line, "refused: " + string(f.Reason)}
	}
	if f.Reason == botapi.ReasonNotDispatched {
		return outcome{exitSendNotDispatched, "not dispatched: no byte of the request left; sending again cannot duplicate it", "not dispatched"}
	}
	return outcome{exitSendUnknown,
		fmt.Sprintf("unknown: the request may have reached Telegram (%v); do not send it again blindly", err),
		"outcome unknown"}
}
