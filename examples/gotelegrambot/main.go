// Command gotelegrambot shows tgrelay's transport as the HTTP client of
// github.com/go-telegram/bot: the bot library stays as it is, and every
// failed call can be told apart as not dispatched (safe to repeat) or
// unknown (may have arrived).
//
// Usage:
//
//	TELEGRAM_BOT_TOKEN=123:abc go run . -chat 42 -text "hello"
//
// -api-root points it at a local Bot API server or at telegramtest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/go-telegram/bot"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/transport"
)

// pollTimeout is the long-polling timeout handed to the bot library; the
// transport's response timeout is set above it so a long poll is not cut.
const pollTimeout = 30 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv("TELEGRAM_BOT_TOKEN"), os.Stdout); err != nil {
		// go-telegram/bot wraps Go's *url.Error, whose message holds the
		// URL and so the token: redact before printing.
		fmt.Fprintln(os.Stderr, "gotelegrambot:", botapi.Redact(err.Error()))
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, token string, out io.Writer) error {
	fs := flag.NewFlagSet("gotelegrambot", flag.ContinueOnError)
	chatID := fs.Int64("chat", 0, "chat id to send to")
	text := fs.String("text", "hello from tgrelay's transport", "message text")
	apiRoot := fs.String("api-root", "", "Bot API root (default https://api.telegram.org)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if token == "" || *chatID == 0 {
		return errors.New("set TELEGRAM_BOT_TOKEN and -chat")
	}

	client, err := transport.NewClient(transport.Config{ResponseTimeout: pollTimeout + 10*time.Second})
	if err != nil {
		return err
	}
	opts := []bot.Option{bot.WithHTTPClient(pollTimeout, client), bot.WithSkipGetMe()}
	if *apiRoot != "" {
		opts = append(opts, bot.WithServerURL(*apiRoot))
	}
	b, err := bot.New(token, opts...)
	if err != nil {
		return err
	}

	msg, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: *chatID, Text: *text})
	if err != nil {
		// The bot library keeps the cause chain (%w), so the transport's
		// verdict survives: not-dispatched is safe to send again.
		f := botapi.Classify(err)
		fmt.Fprintf(out, "send failed: reason=%s retryable=%t evidence=%s\n", f.Reason, f.Retryable, f.Evidence)
		return err
	}
	fmt.Fprintf(out, "sent message %d\n", msg.ID)
	return nil
}
