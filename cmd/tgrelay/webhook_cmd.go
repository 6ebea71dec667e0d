package main

import (
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/hookowner"
)

const webhookHelp = `
Usage: tgrelay webhook <set|check|delete> [--url URL] [--secret S] [--takeover-from HOST]
                       [--certificate FILE] [--token T] [--api-root URL]
                       [--log-level debug]

Webhook manages the bot's single Telegram webhook under tgrelay's ownership
rules. The address tgrelay registers carries an owner tag derived from the
webhook secret (never the secret itself), so a deployment can tell its own
webhook from another's.

  set --url URL      point the webhook at URL, only if it is already this
                     secret's, or --takeover-from names the host it points to
                     now ("none" for a bot without a webhook); with
                     --certificate, upload that PEM certificate so Telegram
                     trusts a self-signed one ('tgrelay serve --self-signed'
                     does this itself)
  check --url URL    exit 0 if the webhook is this URL with this secret's tag;
                     print Telegram's pending count and last delivery error
  delete             remove the webhook, under the same rules as set

Refusals name the current owner's host only (another deployment's path may
itself be a secret) and exit 1. The secret comes from --secret or
TGRELAY_WEBHOOK_SECRET, the token from --token or TGRELAY_TOKEN; the
environment keeps them out of the process list. Neither is ever printed.
A failed call is told in one line, with the flags to check; --log-level
debug prints its full error too, as serve does.
`

func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	var bf botFlags
	bf.register(fs)
	rawURL := fs.String("url", "", "public HTTPS `URL` Telegram posts to (set, check)")
	secret := fs.String("secret", "", "webhook `secret`, 1-256 of A-Z a-z 0-9 _ - (default $"+envWebhookSecret+")")
	takeover := fs.String("takeover-from", "", "set, delete: `host` of the current owner to take over from (\"none\" for no webhook)")
	certFile := fs.String("certificate", "", "set: PEM `file` of a self-signed certificate to upload with setWebhook")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error; debug prints a failure's full error")
	fs.Usage = commandUsage(fs, webhookHelp)
	pos, err := parseInterleaved(fs, args, stdout)
	if err != nil {
		return err
	}
	warnUnknownEnv(stderr, "webhook", os.Environ())
	hint := "Run 'tgrelay help webhook' for usage."
	// The URL is the user's own, and may carry the token or the secret
	// (Telegram's docs suggest a secret path): the output and the log
	// mask them.
	red := &botapi.Redactor{}
	log, err := newLogger(stderr, "text", *logLevel, red)
	if err != nil {
		return withHint(err, hint)
	}
	if len(pos) != 1 {
		return &usageError{msg: "give exactly one subcommand: set, check or delete", hint: hint}
	}
	sub := pos[0]
	switch sub {
	case "set", "check":
		if *rawURL == "" {
			return &usageError{msg: sub + " needs --url", hint: hint}
		}
	case "delete":
	default:
		return &usageError{msg: fmt.Sprintf("unknown subcommand %q", sub), hint: hint}
	}
	if sub == "set" {
		if err := checkTelegramWebhookURL("--url", *rawURL, bf.apiRoot); err != nil {
			return err
		}
	}
	if sub == "check" && *takeover != "" {
		return &usageError{msg: "--takeover-from applies to set and delete", hint: hint}
	}
	if sub != "set" && *certFile != "" {
		return &usageError{msg: "--certificate applies to set", hint: hint}
	}
	var cert []byte
	if *certFile != "" {
		if cert, err = readBounded(*certFile, maxCAFileBytes); err != nil {
			return inOneLine(fmt.Errorf("--certificate: %w", err), log)
		}
		if b, _ := pem.Decode(cert); b == nil || b.Type != "CERTIFICATE" {
			return &usageError{msg: "--certificate holds no PEM certificate", hint: hint}
		}
	}
	if *secret == "" {
		*secret = os.Getenv(envWebhookSecret)
	}
	if *secret == "" {
		return &usageError{msg: "no webhook secret", hint: "Set " + envWebhookSecret + " or pass --secret."}
	}
	if _, err := hookowner.OwnerTag(*secret); err != nil {
		return &usageError{msg: err.Error(), hint: hint}
	}
	c, err := bf.client("webhook")
	if err != nil {
		return err
	}
	red.Add(bf.token, os.Getenv(envToken), *secret)
	switch sub {
	case "set":
		res, err := hookowner.Claim(ctx, c, hookowner.ClaimConfig{URL: *rawURL, Secret: *secret, TakeoverFrom: *takeover, Certificate: cert})
		if err != nil {
			return webhookError("set", err, log)
		}
		if res.TakenFrom != "" {
			fmt.Fprintf(stdout, "webhook taken over from %s\n", res.TakenFrom)
		}
		fmt.Fprintf(stdout, "webhook set: %s (pending updates: %d)\n", red.Redact(res.URL), res.PendingUpdates)
		return nil
	case "check":
		st, err := hookowner.Check(ctx, c, *rawURL, *secret)
		if err != nil {
			return webhookError("check", err, log)
		}
		if st.Owned {
			fmt.Fprintf(stdout, "webhook is ours (pending updates: %d)\n", st.PendingUpdates)
		} else {
			fmt.Fprintf(stdout, "webhook is NOT ours: it points to %s (pending updates: %d)\n", st.OwnerHost, st.PendingUpdates)
		}
		if st.LastError != "" {
			fmt.Fprintf(stdout, "last delivery error at %s: %s\n", fmtTime(st.LastErrorAt), st.LastError)
		}
		if !st.Owned {
			return fmt.Errorf("the webhook points to %s, not here", st.OwnerHost)
		}
		return nil
	default: // delete
		if err := hookowner.Delete(ctx, c, *secret, *takeover); err != nil {
			return webhookError("delete", err, log)
		}
		fmt.Fprintln(stdout, "webhook deleted (pending updates kept)")
		return nil
	}
}

// webhookError explains a refusal (host only), or tells a call failure in
// one line ("check the webhook: the Bot API was not reached: ...") with the
// flags to check, logging the whole chain at debug level (inOneLine).
func webhookError(sub string, err error, log *slog.Logger) error {
	var ce *hookowner.ClaimError
	if errors.As(err, &ce) {
		switch ce.Reason {
		case hookowner.ReasonOwnedElsewhere:
			return fmt.Errorf("refused: the webhook belongs to %s; to take it over, pass --takeover-from %s", ce.OwnerHost, ce.OwnerHost)
		case hookowner.ReasonOtherSecret:
			return fmt.Errorf("refused: the webhook at %s was set with another secret; to take it over, pass --takeover-from %s", ce.OwnerHost, ce.OwnerHost)
		}
	}
	return inOneLine(fmt.Errorf("%s the webhook: %w", sub, err), log)
}
