// Command gotelegrambot is a github.com/go-telegram/bot bot on tgrelay's
// intake: every update is recorded in SQLite before Telegram gets its 200,
// handled at least once, in chat order, retried on Telegram's schedule, and
// its sends go through tgrelay's transport, so a send whose outcome is
// unknown is never repeated.
//
// Usage:
//
//	TELEGRAM_BOT_TOKEN=123:abc WEBHOOK_SECRET=s3cret go run . -listen :8080 -url https://bot.example.com/telegram
//
// -api-root points it at a local Bot API server or at telegramtest.
//
// The trap: go-telegram/bot runs handlers on their own goroutine unless
// bot.WithNotAsyncHandlers is set. Then ProcessUpdate returns at once, the
// runner marks the update done before its handler ran, and a failed send
// is never retried. [New] always sets it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/transport"
)

// Config configures the bot.
type Config struct {
	Token   string // the bot token
	APIRoot string // the Bot API root; "" means https://api.telegram.org
	DB      string // the SQLite file
	Secret  string // the webhook's secret_token
	// unsafeAsync leaves go-telegram/bot's handlers asynchronous: the trap,
	// for the test that shows it.
	unsafeAsync bool
}

// App is the bot: its runner and the webhook Telegram posts to.
type App struct {
	Bot     *bot.Bot
	Runner  *intake.Runner
	Webhook *intake.Webhook
	store   *sqlitestore.Store
}

// New assembles the bot: store → runner → webhook. Start the runner with
// App.Runner.Start and end with App.Close.
func New(ctx context.Context, cfg Config) (*App, error) {
	client, err := transport.NewClient(transport.Config{})
	if err != nil {
		return nil, err
	}
	opts := []bot.Option{
		bot.WithHTTPClient(time.Minute, client),
		bot.WithSkipGetMe(),
		bot.WithDefaultHandler(echo),
		// Errors go-telegram/bot reports on its own quote the request URL,
		// and so the token: redact them.
		bot.WithErrorsHandler(func(err error) { fmt.Fprintln(os.Stderr, botapi.Redact(err.Error())) }),
	}
	if !cfg.unsafeAsync {
		opts = append(opts, bot.WithNotAsyncHandlers()) // the handler runs inside the attempt
	}
	if cfg.APIRoot != "" {
		opts = append(opts, bot.WithServerURL(cfg.APIRoot))
	}
	b, err := bot.New(cfg.Token, opts...)
	if err != nil {
		return nil, err
	}
	store, err := sqlitestore.Open(ctx, cfg.DB, sqlitestore.Config{})
	if err != nil {
		return nil, err
	}
	runner, err := intake.New(intake.Config{
		Store: store,
		Handler: func(ctx context.Context, u intake.Update) error {
			var upd models.Update
			if err := u.Decode(&upd); err != nil {
				return intake.Abandon(err)
			}
			b.ProcessUpdate(ctx, &upd) // handlers report failures with intake.ReportError
			return nil
		},
		KeepExhaustions: true, // dead letters stay for `tgrelay updates`
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	hook, err := intake.NewWebhook(intake.WebhookConfig{Runner: runner, Secret: cfg.Secret})
	if err != nil {
		store.Close()
		return nil, err
	}
	return &App{Bot: b, Runner: runner, Webhook: hook, store: store}, nil
}

// Close stops the runner (waiting for handlers until ctx ends) and closes
// the store.
func (a *App) Close(ctx context.Context) error {
	return errors.Join(a.Runner.Close(ctx), a.store.Close())
}

// echo answers a text message with its text. go-telegram/bot's handlers
// return nothing: a failed send is reported to the runner, which retries
// the update (or gives it up when the outcome is unknown).
func echo(ctx context.Context, b *bot.Bot, upd *models.Update) {
	if upd.Message == nil || upd.Message.Text == "" {
		return
	}
	_, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: upd.Message.Chat.ID, Text: "echo: " + upd.Message.Text})
	intake.ReportError(ctx, err)
}

func main() {
	listen := flag.String("listen", ":8080", "address to serve the webhook on")
	url := flag.String("url", "", "public URL of the webhook (registered with setWebhook)")
	apiRoot := flag.String("api-root", "", "Bot API root (default https://api.telegram.org)")
	db := flag.String("db", "bot.db", "SQLite file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, Config{Token: os.Getenv("TELEGRAM_BOT_TOKEN"), Secret: os.Getenv("WEBHOOK_SECRET"), APIRoot: *apiRoot, DB: *db}, *listen, *url); err != nil {
		fmt.Fprintln(os.Stderr, "gotelegrambot:", botapi.Redact(err.Error()))
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg Config, listen, url string) error {
	app, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	defer app.Close(context.Background())
	if err := app.Runner.Start(ctx); err != nil {
		return err
	}
	if _, err := app.Bot.SetWebhook(ctx, &bot.SetWebhookParams{URL: url, SecretToken: cfg.Secret}); err != nil {
		return err
	}
	srv := &http.Server{Addr: listen, Handler: app.Webhook, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
