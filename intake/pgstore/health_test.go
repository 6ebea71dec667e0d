package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// cutProxy forwards loopback connections to the server at target until
// cut closes the listener and every forwarded connection: the database
// becomes unreachable, as when a network link or the server goes away.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, network, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial(network, target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(s, c); s.Close() })
			p.wg.Go(func() { io.Copy(c, s); c.Close() })
		}
	})
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// webhookStatus posts update id to a webhook on a runner over st (not
// started: it only records) and returns the status code.
func webhookStatus(t *testing.T, st intake.Store, id int64) int {
	t.Helper()
	r, err := intake.New(intake.Config{Store: st, Handler: func(context.Context, intake.Update) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, InsecureNoSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wh)
	defer srv.Close()
	res, err := http.Post(srv.URL, "application/json", strings.NewReader(fmt.Sprintf(`{"update_id":%d}`, id)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestLostConnectionAnswers503(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	network, target := "tcp", net.JoinHostPort(cfg.ConnConfig.Host, fmt.Sprint(cfg.ConnConfig.Port))
	if strings.HasPrefix(cfg.ConnConfig.Host, "/") {
		network, target = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	}
	proxy := newCutProxy(t, network, target)
	addr := proxy.ln.Addr().(*net.TCPAddr)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(addr.Port)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if code := webhookStatus(t, st, 1); code != http.StatusOK {
		t.Fatalf("POST before the cut = %d, want 200", code)
	}
	if err := st.Health(t.Context()); err != nil {
		t.Fatalf("Health before the cut = %v", err)
	}
	proxy.cut()
	if code := webhookStatus(t, st, 2); code != http.StatusServiceUnavailable {
		t.Fatalf("POST with the database unreachable = %d, want 503", code)
	}
	if err := st.Health(t.Context()); err == nil {
		t.Fatal("Health with the database unreachable = nil")
	}
	if _, err := addBatch(t.Context(), st, []intake.Incoming{{UpdateID: 3, Body: []byte(`{}`), ReceivedAt: at(0)}}); err == nil {
		t.Fatal("AddBatch with the database unreachable reported success")
	}
}

func TestReadOnlyServerAnswers503(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	if _, err := pgstore.New(t.Context(), poolFor(t, url), pgstore.Config{}); err != nil {
		t.Fatal(err)
	}
	// Every transaction of this pool is read-only, as on a standby.
	pool := poolWith(t, url, map[string]string{"default_transaction_read_only": "on"})
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{NoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Health(t.Context()); !errors.Is(err, pgstore.ErrReadOnly) {
		t.Fatalf("Health on a read-only server = %v, want ErrReadOnly", err)
	}
	if code := webhookStatus(t, st, 1); code != http.StatusServiceUnavailable {
		t.Fatalf("POST to a read-only server = %d, want 503", code)
	}
	if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 2, Body: []byte(`{}`), ReceivedAt: at(0)}); err == nil {
		t.Fatal("Add on a read-only server reported success")
	}
	if _, _, err := st.Claim(t.Context(), 2, claimOpts(0, 10)); err == nil {
		t.Fatal("Claim on a read-only server returned no error")
	}
}
