package relay_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/internal/tlscert"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestRelayHTTPSWithUploadedCertificate: the webhook serves HTTPS with
// Config.TLSConfig, the certificate of WebhookCertificateFunc is uploaded
// with the claim, and ReclaimWebhook uploads a replacement; the fake
// Telegram, strict, delivers only through the uploaded certificate.
func TestRelayHTTPSWithUploadedCertificate(t *testing.T) {
	t.Parallel()
	const ip = "203.0.113.9"
	hook := listen(t)
	srv := telegramtest.NewServer(telegramtest.Config{
		Webhook: telegramtest.WebhookConfig{
			Timeout: 10 * time.Second, Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 1000,
			Strict: true,
			DialContextFunc: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, hook.Addr().String())
			},
		},
		Logf: t.Logf,
	})
	t.Cleanup(srv.Close)
	var certs [2]*tlscert.SelfSigned
	for i := range certs {
		var err error
		if certs[i], err = tlscert.OpenSelfSigned(tlscert.SelfSignedConfig{Dir: t.TempDir(), Host: ip}); err != nil {
			t.Fatal(err)
		}
	}
	var current atomic.Int32
	ep := newBotEndpoint(t, nil)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	cfg.Poll, cfg.PollTimeout = false, 0
	cfg.Listener, cfg.Secret, cfg.TakeoverFrom = hook, testSecret, hookowner.HostNone
	cfg.PublicURL = "https://" + ip + ":8443/telegram"
	cfg.TLSConfig = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return certs[current.Load()].GetCertificate(h)
	}}
	cfg.WebhookCertificateFunc = func() []byte { return certs[current.Load()].CertificatePEM() }
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReclaimWebhook(t.Context()); err == nil {
		t.Error("ReclaimWebhook before Start succeeded")
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if got := r.Status().WebhookURL; !strings.HasPrefix(got, "https://") {
		t.Errorf("WebhookURL = %q, want https://", got)
	}
	ups := sendChatter(t, srv, 2, 4)
	testkit.WaitFor(t, "every update forwarded over HTTPS", func() bool { return ep.distinct() == len(ups) })

	// The served certificate changes and is uploaded again: deliveries go on.
	current.Store(1)
	if err := r.ReclaimWebhook(t.Context()); err != nil {
		t.Fatal(err)
	}
	more := sendChatter(t, srv, 2, 4)
	testkit.WaitFor(t, "the later updates forwarded through the new certificate", func() bool { return ep.distinct() == len(ups)+len(more) })
	for _, d := range srv.Deliveries() {
		if d.Err != "" {
			t.Errorf("delivery failed: %+v", d)
		}
	}
}

func TestRelayTLSConfigErrors(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	for field, edit := range map[string]func(*relay.Config){
		"TLSConfig": func(c *relay.Config) { c.TLSConfig = &tls.Config{} },
		"WebhookCertificateFunc": func(c *relay.Config) {
			c.Poll, c.PollTimeout, c.Secret = false, 0, testSecret
			c.WebhookCertificateFunc = func() []byte { return nil }
		},
	} {
		cfg := baseConfig(t, srv, ep, &testkit.SyncBuffer{}, newRecorder())
		edit(&cfg)
		_, err := relay.New(cfg)
		if ce, ok := errors.AsType[*relay.ConfigError](err); !ok || ce.Field != field {
			t.Errorf("%s: error %v, want a ConfigError naming it", field, err)
		}
	}
}
