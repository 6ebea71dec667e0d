package telegramtest_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// Strict webhook delivery, as Telegram delivers: the bot's URL must be
// https on an allowed port, and its certificate must be trusted for the
// URL's name. A dial override maps that Telegram-valid address to the
// bot's loopback listener.
func Example_strictWebhook() {
	bot := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	bot.Config.ErrorLog = log.New(io.Discard, "", 0)
	bot.StartTLS() // its certificate is for example.com (and 127.0.0.1)
	defer bot.Close()
	roots := x509.NewCertPool()
	roots.AddCert(bot.Certificate())

	srv := telegramtest.NewServer(telegramtest.Config{Webhook: telegramtest.WebhookConfig{
		Strict:      true,
		RootCAs:     roots,
		MaxAttempts: 1,
		DialContextFunc: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, bot.Listener.Addr().String())
		},
		Backoff: time.Millisecond,
	}})
	defer srv.Close()
	setWebhook := func(u string) {
		resp, _ := srv.Client().PostForm(srv.URL+"/bot"+srv.Token+"/setWebhook", url.Values{"url": {u}})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s: %s\n", u, b)
	}
	ada := srv.NewUser("Ada")
	chat, _ := srv.NewPrivateChat(ada)

	setWebhook("https://example.com:8080/hook") // a port Telegram does not deliver to
	setWebhook("https://example.com:8443/hook")
	srv.SendText(chat, ada, "hello")
	srv.WaitIdle(context.Background())
	setWebhook("https://other.example.net/hook") // the certificate is not for this name
	srv.SendText(chat, ada, "hello again")
	srv.WaitIdle(context.Background())
	for _, d := range srv.Deliveries() {
		line := fmt.Sprint("attempt: status ", d.Status)
		if d.Err != "" {
			line += " " + d.Err
		}
		fmt.Println(line)
	}
	// Output:
	// https://example.com:8080/hook: {"ok":false,"error_code":400,"description":"Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443"}
	// https://example.com:8443/hook: {"ok":true,"result":true,"description":"Webhook was set"}
	// https://other.example.net/hook: {"ok":true,"result":true,"description":"Webhook was set"}
	// attempt: status 200
	// attempt: status 0 SSL error {error:0A000086:SSL routines::certificate verify failed}
}
