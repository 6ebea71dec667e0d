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

Send sends one message through tgrelay's dispatch-aware transport and says
honestly what became of it:

  answered        Telegram accepted it; prints the message id      exit 0
  refused         Telegram refused it; prints the reason           exit 3
  not dispatched  no byte left this process; safe to send again    exit 4
  unknown         it may have arrived; never repeat it blindly     exit 5

Exit 1 is an error before any call (such as a malformed token), exit 2 a
usage error. The token comes from --token or, better (it stays out of the
process list), the TGRELAY_TOKEN environment variable; it never appears in
the output.
`

// botFlags are the flags of the commands that call the Bot API.
type botFlags struct {
	token   string
	apiRoot string
}

func (b *botFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.token, "token", "", "bot `token` (default $"+envToken+")")
	fs.StringVar(&b.apiRoot, "api-root", botapi.DefaultAPIRoot, "Bot API root `URL` (a local Bot API server, or `tgrelay sandbox`)")
}

// client returns a Bot API client over tgrelay's transport.
func (b *botFlags) client(cmd string) (*botapi.Client, error) {
	token := b.token
	if token == "" {
		token = os.Getenv(envToken)
	}
	if token == "" {
		return nil, &usageError{msg: "no bot token", hint: "Set " + envToken + " or pass --token."}
	}
	hc, err := transport.NewClient(transport.Config{})
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	c, err := botapi.New(token, botapi.Config{APIRoot: b.apiRoot, HTTPClient: hc})
	if err != nil {
		if errors.Is(err, botapi.ErrInvalidToken) {
			return nil, &usageError{msg: "the bot token is malformed", hint: "A token looks like 123456:ABC…; run 'tgrelay help " + cmd + "'."}
		}
		return nil, fmt.Errorf("bot API client: %w", err)
	}
	return c, nil
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
		return outcome{exitSendNotDispatched,
			fmt.Sprintf("not dispatched (stage %s): no byte of the request left; sending again cannot duplicate it", nd.Stage),
			"not dispatched"}
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
