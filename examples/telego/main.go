// Command telego is a github.com/mymmrac/telego bot on tgrelay's intake:
// every update is recorded in SQLite before Telegram gets its 200, handled
// at least once, in chat order, retried on Telegram's schedule, and its
// sends go through tgrelay's transport — telego.WithHTTPClient switches
// telego from fasthttp to net/http, and so to any http.Client — so a send
// whose outcome is unknown is never repeated.
//
// Usage:
//
//	TELEGRAM_BOT_TOKEN=123:abc WEBHOOK_SECRET=s3cret go run . -listen :8080 -url https://bot.example.com/telegram
//
// -api-root points it at a local Bot API server or at telegramtest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/mymmrac/telego"

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
	// Logger receives the runner's lines (failed attempts, store errors),
	// masked by the redactor; nil logs to stderr.
	Logger *slog.Logger
}

// App is the bot: its runner and the webhook Telegram posts to.
type App struct {
	Bot     *telego.Bot
	Runner  *intake.Runner
	Webhook *intake.Webhook
	// Redactor masks the token and the webhook secret. telego's errors
	// quote the request URL, and so the token: every text that leaves the
	// bot (the runner's stored errors and log lines, main's last word)
	// passes through it.
	Redactor *botapi.Redactor
	store    *sqlitestore.Store
}

// New assembles the bot: store → runner → webhook. Start the runner with
// App.Runner.Start and end with App.Close.
func New(ctx context.Context, cfg Config) (*App, error) {
	client, err := transport.NewClient(transport.Config{})
	if err != nil {
		return nil, err
	}
	opts := []telego.BotOption{
		telego.WithHTTPClient(client), // net/http, through tgrelay's transport
		telego.WithDiscardLogger(),    // its error log would quote the request URL (the token)
	}
	if cfg.APIRoot != "" {
		opts = append(opts, telego.WithAPIServer(cfg.APIRoot))
	}
	b, err := telego.NewBot(cfg.Token, opts...)
	if err != nil {
		return nil, err
	}
	red := &botapi.Redactor{}
	red.Add(cfg.Token, cfg.Secret)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	store, err := sqlitestore.Open(ctx, cfg.DB, sqlitestore.Config{})
	if err != nil {
		return nil, err
	}
	runner, err := intake.New(intake.Config{
		Store: store,
		Handler: func(ctx context.Context, u intake.Update) error {
			var upd telego.Update
			if err := u.Decode(&upd); err != nil {
				return intake.Abandon(err)
			}
			return echo(ctx, b, upd)
		},
		KeepExhaustions: true, // dead letters stay for `tgrelay updates`
		// The handler passes telego's error on as it is (the retry policy
		// reads its Telegram answer); the runner masks the token in it
		// before it is stored or logged.
		Redactor: red,
		Logger:   log,
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
	return &App{Bot: b, Runner: runner, Webhook: hook, Redactor: red, store: store}, nil
}

// Close stops the runner (waiting for handlers until ctx ends) and closes
// the store.
func (a *App) Close(ctx context.Context) error {
	return errors.Join(a.Runner.Close(ctx), a.store.Close())
}

// echo answers a text message with its text. Its error goes to the
// runner: telego's *telegoapi.Error carries Telegram's code and
// retry_after, which intake.DefaultRetry reads.
func echo(ctx context.Context, b *telego.Bot, upd telego.Update) error {
	if upd.Message == nil || upd.Message.Text == "" {
		return nil
	}
	_, err := b.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: upd.Message.Chat.ID}, Text: "echo: " + upd.Message.Text})
	return err
}

func main() {
	listen := flag.String("listen", ":8080", "address to serve the webhook on")
	url := flag.String("url", "", "public URL of the webhook (registered with setWebhook)")
	apiRoot := flag.String("api-root", "", "Bot API root (default https://api.telegram.org)")
	db := flag.String("db", "bot.db", "SQLite file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := Config{Token: os.Getenv("TELEGRAM_BOT_TOKEN"), Secret: os.Getenv("WEBHOOK_SECRET"), APIRoot: *apiRoot, DB: *db}
	if err := run(ctx, cfg, *listen, *url); err != nil {
		red := &botapi.Redactor{}
		red.Add(cfg.Token, cfg.Secret)
		fmt.Fprintln(os.Stderr, "telego:", red.Redact(err.Error()))
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
	if err := app.Bot.SetWebhook(ctx, &telego.SetWebhookParams{URL: url, SecretToken: cfg.Secret}); err != nil {
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
