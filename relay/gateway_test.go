package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// TestRelayGateway: an app behind the relay replies through the gateway,
// using the per-attempt API root each forward announces. Its first attempt
// sends, then fails; the retry's identical send is replayed, so the chat
// gets the reply once; a later call of the failed attempt is refused
// (409), and one of the attempt that completed the update is sent (its
// tail).
func TestRelayGateway(t *testing.T) {
	srv := fakeTelegram(t)
	u := srv.NewUser("Ann")
	chat, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		roots   []string
		answers []int
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		root := r.Header.Get(wire.HeaderAPIRoot)
		body := fmt.Sprintf(`{"chat_id":%d,"text":"echo"}`, chat.ID)
		resp, err := http.Post(root+"/bot"+srv.Token+"/sendMessage", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Errorf("send through the gateway: %v", err)
			w.WriteHeader(500)
			return
		}
		resp.Body.Close()
		mu.Lock()
		roots = append(roots, root)
		answers = append(answers, resp.StatusCode)
		n := len(roots)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(500) // sent, then failed
		}
	}))
	t.Cleanup(app.Close)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), logs, rec)
	cfg.Forward = forward.Config{URL: app.URL}
	cfg.Gateway = relay.GatewayConfig{Listener: listen(t)}
	r := start(t, cfg)
	if r.GatewayURL() == "" {
		t.Fatal("no gateway URL")
	}
	up, err := srv.SendText(chat, u, "hi")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the retry to complete", func() bool { return rec.count("settled") >= 2 })
	mu.Lock()
	defer mu.Unlock()
	if len(roots) != 2 || answers[0] != 200 || answers[1] != 200 || roots[0] == roots[1] {
		t.Fatalf("roots %q, answers %v; want two attempts' roots, both answered 200", roots, answers)
	}
	if n := len(srv.MessagesTo(chat.ID)); n != 1 {
		t.Errorf("the chat got %d messages; want the reply once", n)
	}
	replayed := func() int {
		n := 0
		for _, e := range rec.all(relay.KindGatewayCall) {
			if e.Call.Replayed {
				n++
			}
		}
		return n
	}
	// A call's event follows the answer's write, which the app may read to
	// its end first.
	testkit.WaitFor(t, "the replayed call's event", func() bool { return replayed() >= 1 })
	if replayed := replayed(); replayed != 1 {
		t.Errorf("%d replayed gateway calls; want 1", replayed)
	}
	late := func(root, text string) *http.Response {
		t.Helper()
		resp, err := http.Post(root+"/bot"+srv.Token+"/sendMessage", "application/json",
			bytes.NewBufferString(fmt.Sprintf(`{"chat_id":%d,"text":%q}`, chat.ID, text)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// The failed attempt is stale; the one that completed the update goes
	// on (its tail), journaled.
	if resp := late(roots[0], "late"); resp.StatusCode != gateway.StatusStale || resp.Header.Get(wire.HeaderOutcome) != "stale" {
		t.Errorf("the failed attempt's call = %d; want 409 stale", resp.StatusCode)
	}
	if resp := late(roots[1], "tail"); resp.StatusCode != 200 {
		t.Errorf("the completing attempt's later call = %d; want 200", resp.StatusCode)
	}
	var texts []string
	for _, m := range srv.MessagesTo(chat.ID) {
		texts = append(texts, m.Text)
	}
	if !slices.Equal(texts, []string{"echo", "tail"}) {
		t.Errorf("the chat got %q; want the reply once, then the tail's call", texts)
	}
	entries, err := r.Journal(t.Context(), up.ID)
	if err != nil || len(entries) != 2 || entries[0].Method != "sendMessage" || entries[1].Method != "sendMessage" {
		b, _ := json.Marshal(entries)
		t.Errorf("journal of the update = %s, %v; want the reply and the tail's call", b, err)
	}
}

// TestRelayGatewayWebhookReply: a webhook reply in the app's answer is
// performed through the gateway.
func TestRelayGatewayWebhookReply(t *testing.T) {
	srv := fakeTelegram(t)
	u := srv.NewUser("Bo")
	chat, _ := srv.NewPrivateChat(u)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"method":"sendMessage","chat_id":%d,"text":"webhook reply"}`, chat.ID)
	}))
	t.Cleanup(app.Close)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), logs, rec)
	cfg.Forward = forward.Config{URL: app.URL}
	cfg.Gateway = relay.GatewayConfig{Listener: listen(t)}
	start(t, cfg)
	if _, err := srv.SendText(chat, u, "hi"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the reply", func() bool { return len(srv.MessagesTo(chat.ID)) == 1 })
	testkit.WaitFor(t, "the settlement", func() bool { return rec.count("settled") == 1 })
	if rec.count(string(relay.KindUnactedReply)) != 0 {
		t.Errorf("the reply was reported unacted")
	}
}

func TestGatewayConfig(t *testing.T) {
	srv := fakeTelegram(t)
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), &testkit.SyncBuffer{}, newRecorder())
	cfg.Gateway = relay.GatewayConfig{Listen: "0.0.0.0:8081"}
	_, err := relay.New(cfg)
	var ce *relay.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Gateway.Listen" {
		t.Errorf("a public gateway address without AllowRemote: %v", err)
	}
	cfg.Gateway.AllowRemote = true
	if _, err := relay.New(cfg); err != nil {
		t.Errorf("with AllowRemote: %v", err)
	}
	cfg.Gateway.ResponseTimeout = 11 * time.Minute
	if _, err := relay.New(cfg); !errors.As(err, &ce) || ce.Field != "Gateway.ResponseTimeout" {
		t.Errorf("a response timeout above the bound: %v", err)
	}
}

// TestRelayGatewayOnPortZero: a gateway listening on port 0 is announced at
// the address it bound, and a call made under the announced root the way
// most libraries join it (root + "/bot<token>/<method>") is the attempt's.
func TestRelayGatewayOnPortZero(t *testing.T) {
	srv := fakeTelegram(t)
	u := srv.NewUser("Ann")
	chat, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	roots := make(chan string, 4)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		root := r.Header.Get(wire.HeaderAPIRoot)
		if root != "" {
			body := fmt.Sprintf(`{"chat_id":%d,"text":"echo"}`, chat.ID)
			if resp, err := http.Post(root+"/bot"+srv.Token+"/sendMessage", "application/json", bytes.NewBufferString(body)); err == nil {
				resp.Body.Close()
			}
		}
		roots <- root
	}))
	t.Cleanup(app.Close)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), logs, rec)
	cfg.Forward = forward.Config{URL: app.URL}
	cfg.Gateway = relay.GatewayConfig{Listen: "127.0.0.1:0"}
	r := start(t, cfg)
	if _, err := srv.SendText(chat, u, "hi"); err != nil {
		t.Fatal(err)
	}
	var root string
	select {
	case root = <-roots:
	case <-time.After(20 * time.Second):
		t.Fatal("no forward")
	}
	want := "http://" + r.GatewayAddr().String() + "/a/"
	if !strings.HasPrefix(root, want) || !strings.HasSuffix(root, "/bot") || r.GatewayURL() != "http://"+r.GatewayAddr().String() {
		t.Errorf("announced root %q, gateway URL %q; want %s…/bot", root, r.GatewayURL(), want)
	}
	testkit.WaitFor(t, "the reply", func() bool { return len(srv.MessagesTo(chat.ID)) == 1 })
}

// TestRelayBotTransportReachesTheGateway: Config.BotTransport is how every
// Bot API call of the relay gets to APIRoot, the gateway's included. Here
// the API root's host is known only to BotTransport's resolver: polling
// and the app's call through the gateway both work, and both asked it.
func TestRelayBotTransportReachesTheGateway(t *testing.T) {
	srv := fakeTelegram(t)
	u := srv.NewUser("Ann")
	chat, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	var lookups atomic.Int32
	bt := transport.Config{
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil },
		LookupFunc: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			if host != "telegram.internal.test" {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			lookups.Add(1)
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	}
	answers := make(chan int, 4)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		body := fmt.Sprintf(`{"chat_id":%d,"text":"echo"}`, chat.ID)
		resp, err := http.Post(r.Header.Get(wire.HeaderAPIRoot)+"/bot"+srv.Token+"/sendMessage", "application/json", bytes.NewBufferString(body))
		if err != nil {
			answers <- 0
			return
		}
		resp.Body.Close()
		answers <- resp.StatusCode
	}))
	t.Cleanup(app.Close)
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), &testkit.SyncBuffer{}, newRecorder())
	cfg.APIRoot, cfg.BotTransport = "http://telegram.internal.test:"+port, bt
	cfg.Forward = forward.Config{URL: app.URL}
	cfg.Gateway = relay.GatewayConfig{Listener: listen(t)}
	start(t, cfg)
	if _, err := srv.SendText(chat, u, "hi"); err != nil {
		t.Fatal(err)
	}
	select {
	case status := <-answers:
		if status != http.StatusOK {
			t.Fatalf("the app's call through the gateway = %d; want 200", status)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no forward")
	}
	if n := len(srv.MessagesTo(chat.ID)); n != 1 {
		t.Errorf("the chat holds %d messages; want the reply", n)
	}
	if n := lookups.Load(); n < 2 {
		t.Errorf("BotTransport's resolver was asked %d times; want by polling's transport and by the gateway's", n)
	}

	bad := baseConfig(t, srv, newBotEndpoint(t, nil), &testkit.SyncBuffer{}, newRecorder())
	bad.BotTransport.ResponseTimeout = -time.Second
	var ce *relay.ConfigError
	if _, err := relay.New(bad); !errors.As(err, &ce) || ce.Field != "BotTransport.ResponseTimeout" {
		t.Errorf("a negative BotTransport.ResponseTimeout: %v; want a ConfigError naming BotTransport.ResponseTimeout", err)
	}
}
