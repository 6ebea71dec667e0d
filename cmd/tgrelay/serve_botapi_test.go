package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// gatewayRun is what the app behind serve saw of one update: the API root
// announced to it and the answers of its calls through the gateway.
type gatewayRun struct {
	root              string
	getFile, download int
	file              string
	send              int
	sendOutcome       string
	err               error
}

// gatewayApp is an app behind serve that handles a photo the way a bot
// does, through the gateway at the announced root, as grammY builds its
// URLs: getFile, the download, then a sendMessage naming what it got.
func gatewayApp(t *testing.T, token string, runs chan<- gatewayRun) *httptest.Server {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second} // beyond any bound under test
	post := func(u string, params any) (*http.Response, []byte, error) {
		b, _ := json.Marshal(params)
		resp, err := client.Post(u, "application/json", bytes.NewReader(b))
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var upd struct {
			Message struct {
				Chat  struct{ ID int64 } `json:"chat"`
				Photo []struct {
					FileID string `json:"file_id"`
				} `json:"photo"`
			} `json:"message"`
		}
		if err := json.NewDecoder(r.Body).Decode(&upd); err != nil || len(upd.Message.Photo) == 0 {
			return // not the photo
		}
		run := gatewayRun{root: r.Header.Get(wire.HeaderAPIRoot)}
		defer func() { runs <- run }()
		resp, body, err := post(run.root+"/bot"+token+"/getFile", map[string]any{"file_id": upd.Message.Photo[0].FileID})
		if err != nil {
			run.err = fmt.Errorf("getFile: %w", err)
			return
		}
		run.getFile = resp.StatusCode
		var file struct {
			Result struct {
				FilePath string `json:"file_path"`
			} `json:"result"`
		}
		_ = json.Unmarshal(body, &file)
		dl, err := client.Get(run.root + "/file/bot" + token + "/" + file.Result.FilePath)
		if err != nil {
			run.err = fmt.Errorf("download: %w", err)
			return
		}
		data, _ := io.ReadAll(dl.Body)
		dl.Body.Close()
		run.download, run.file = dl.StatusCode, string(data)
		resp, _, err = post(run.root+"/bot"+token+"/sendMessage", map[string]any{"chat_id": upd.Message.Chat.ID, "text": "got " + run.file})
		if err != nil {
			run.err = fmt.Errorf("sendMessage: %w", err)
			return
		}
		run.send, run.sendOutcome = resp.StatusCode, resp.Header.Get(wire.HeaderOutcome)
	}))
	t.Cleanup(app.Close)
	return app
}

// runGatewayPhoto starts serve against apiRoot with the extra flags and a
// gateway on an ephemeral port, has a user send a photo, and returns what
// the app saw.
func runGatewayPhoto(t *testing.T, srv *telegramtest.Server, apiRoot string, extra ...string) (gatewayRun, telegramtest.Chat) {
	t.Helper()
	u := srv.NewUser("Ann")
	chat, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	runs := make(chan gatewayRun, 4)
	app := gatewayApp(t, srv.Token, runs)
	args := append([]string{"--token", srv.Token, "--api-root", apiRoot, "--db", filepath.Join(t.TempDir(), "relay.db"),
		"--poll", "--poll-timeout", "1s", "--forward", app.URL, "--gateway-listen", "127.0.0.1:0",
		"--sweep-interval", "100ms", "--backoff-base", "10ms"}, extra...)
	r := startServeProc(t, nil, args...)
	if _, err := srv.Send(chat, u, telegramtest.UserMessage{Photo: &telegramtest.UserFile{Name: "cat.jpg", Data: []byte("meow")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case run := <-runs:
		if !strings.HasPrefix(run.root, "http://127.0.0.1:") || !strings.HasSuffix(run.root, "/bot") {
			t.Errorf("announced root %q; want the gateway's bound address, ending /bot", run.root)
		}
		return run, chat
	case <-time.After(waitTimeout):
		t.Fatalf("the app never got the photo; serve stderr:\n%s", r.stderr)
	}
	return gatewayRun{}, chat
}

// wantPhotoHandled checks that every call of run was answered and the
// message reached the chat.
func wantPhotoHandled(t *testing.T, srv *telegramtest.Server, run gatewayRun, chat telegramtest.Chat) {
	t.Helper()
	if run.err != nil || run.getFile != 200 || run.download != 200 || run.file != "meow" || run.send != 200 {
		t.Errorf("through the gateway: %+v (error: %v); want getFile, the download and sendMessage answered 200", run, run.err)
	}
	if msgs := srv.MessagesTo(chat.ID); len(msgs) != 1 || msgs[0].Text != "got meow" {
		t.Errorf("the chat holds %+v; want the one reply", msgs)
	}
}

// TestServeBotAPISettingsReachTheGateway: the Bot API client settings of
// serve (--proxy, --ca-file, --timeout, --api-root) apply to the gateway's
// upstream as to serve's own calls: its calls (buffered) and its file
// downloads (streamed). The gateway listens on port 0, and each forward
// announces its bound address.
func TestServeBotAPISettingsReachTheGateway(t *testing.T) {
	t.Parallel()

	t.Run("--proxy", func(t *testing.T) {
		t.Parallel()
		srv := serveFakeTelegram(t)
		// The API root's host does not resolve: only the proxy, which maps
		// it to the fake, reaches it.
		p := newMappingProxy(t, map[string]string{"telegram.invalid:80": strings.TrimPrefix(srv.URL, "http://")})
		run, chat := runGatewayPhoto(t, srv, "http://telegram.invalid", "--proxy", p.url())
		wantPhotoHandled(t, srv, run, chat)
		if n := p.count(); n < 2 {
			t.Errorf("the proxy carried %d connections; want serve's polling and the gateway's", n)
		}
	})

	t.Run("--ca-file", func(t *testing.T) {
		t.Parallel()
		srv := telegramtest.NewUnstartedServer(telegramtest.Config{})
		srv.StartTLS()
		t.Cleanup(srv.Close)
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		run, chat := runGatewayPhoto(t, srv, srv.URL, "--ca-file", ca, "--proxy", "none")
		wantPhotoHandled(t, srv, run, chat)
	})

	t.Run("--timeout", func(t *testing.T) {
		t.Parallel()
		srv := serveFakeTelegram(t)
		// sendMessage is read and never answered: the gateway gives up at
		// --timeout and answers unknown, well before the app's own bound.
		if err := srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultHang}); err != nil {
			t.Fatal(err)
		}
		run, _ := runGatewayPhoto(t, srv, srv.URL, "--timeout", "500ms")
		if run.err != nil || run.getFile != 200 || run.download != 200 || run.send != gateway.StatusUnknown || run.sendOutcome != "unknown" {
			t.Errorf("through the gateway: %+v (error: %v); want getFile and the download 200, sendMessage 502 unknown", run, run.err)
		}
	})

	t.Run("--api-root with a path", func(t *testing.T) {
		t.Parallel()
		srv := serveFakeTelegram(t)
		// A local Bot API server behind a path prefix.
		target, _ := url.Parse(srv.URL)
		rp := httputil.NewSingleHostReverseProxy(target)
		front := httptest.NewServer(http.StripPrefix("/telegram", rp))
		t.Cleanup(front.Close)
		run, chat := runGatewayPhoto(t, srv, front.URL+"/telegram/")
		wantPhotoHandled(t, srv, run, chat)
	})
}

// mappingProxy is an HTTP proxy on loopback that reaches only the hosts
// it maps, by CONNECT tunnels or absolute-form requests, and counts them.
type mappingProxy struct {
	srv   *httptest.Server
	hosts map[string]string

	mu    sync.Mutex
	n     int
	conns []net.Conn
}

func newMappingProxy(t *testing.T, hosts map[string]string) *mappingProxy {
	t.Helper()
	p := &mappingProxy{hosts: hosts}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.srv.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *mappingProxy) url() string { return p.srv.URL }

func (p *mappingProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *mappingProxy) serve(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if r.Method != http.MethodConnect {
		host = r.URL.Host
		if !strings.Contains(host, ":") {
			host += ":80"
		}
	}
	to, ok := p.hosts[host]
	if !ok {
		http.Error(w, "not a mapped host", http.StatusForbidden)
		return
	}
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	if r.Method != http.MethodConnect {
		out := r.Clone(r.Context())
		out.RequestURI, out.URL.Host = "", to
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		return
	}
	upstream, err := net.Dial("tcp", to)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, client, upstream)
	p.mu.Unlock()
	io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() {
		io.Copy(upstream, buf) // what the client sent, buffered or not
		upstream.Close()
	}()
	io.Copy(client, upstream)
	client.Close()
}
