package interop

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// bodyCases are the calls testdata/bots/bodies.mjs makes with each
// framework, in order.
var bodyCases = []string{
	"sendMessage inline keyboard", "sendMessage reply keyboard", "sendMessage remove keyboard",
	"sendMessage force reply", "sendMessage HTML without preview", "sendMessage MarkdownV2",
	"sendMessage entities", "sendMessage reply_parameters", "sendPhoto upload with caption and keyboard",
	"sendPhoto by URL", "sendDocument upload", "sendMediaGroup uploads", "editMessageText with keyboard",
	"editMessageReplyMarkup", "answerCallbackQuery", "deleteMessage",
}

// bodyShapes are fragments each framework's bodies must hold, so the test
// keeps testing the shapes it was written for: Telegraf's stock buttons
// carry "hide":false, and both send uploads as multipart.
var bodyShapes = map[string][]string{
	"grammy":   {`"switch_inline_query_current_chat":"q"`, `"resize_keyboard":true`, "multipart/form-data", `"reply_parameters":{"message_id":`},
	"telegraf": {`"hide":false`, `"resize_keyboard":true`, "multipart/form-data", `"reply_parameters":{"message_id":`},
}

// TestLibraryBodies runs grammY's and Telegraf's own request building for
// the common methods (keyboards, parse modes, replies, uploads, edits,
// callback answers, deletes) against telegramtest, through a proxy that
// captures every body on the wire, and checks that telegramtest accepted
// each call. Run with -v to read the bodies.
func TestLibraryBodies(t *testing.T) {
	t.Parallel()
	for _, fw := range frameworks {
		t.Run(fw, func(t *testing.T) {
			t.Parallel()
			modules := requireNode(t)
			srv := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}})
			t.Cleanup(srv.Close)
			proxy := &captureProxy{srv: srv}
			front := httptest.NewServer(proxy)
			t.Cleanup(front.Close)

			user := srv.NewUser("Ada")
			chat, err := srv.NewPrivateChat(user)
			if err != nil {
				t.Fatal(err)
			}
			msg := sendDirect(t, srv, map[string]any{"chat_id": chat.ID, "text": "Sure?",
				"reply_markup": map[string]any{"inline_keyboard": [][]map[string]string{{{"text": "Yes", "callback_data": "yes"}}}}})
			del := sendDirect(t, srv, map[string]any{"chat_id": chat.ID, "text": "bye"})
			upd, err := srv.PressButton(chat, user, msg, "yes")
			if err != nil {
				t.Fatal(err)
			}

			script, err := filepath.Abs(filepath.Join("testdata", "bots", "bodies.mjs"))
			if err != nil {
				t.Fatal(err)
			}
			p := start(t, fw+" bodies", []string{
				"TGRELAY_NODE_MODULES=" + modules, "FRAMEWORK=" + fw, "TOKEN=" + srv.Token, "API_ROOT=" + front.URL,
				"CHAT=" + itoa(chat.ID), "MSG=" + itoa(msg), "DEL=" + itoa(del), "CALLBACK=" + upd.CallbackQueryID,
			}, "node", script)
			p.waitLine(t, "DONE")

			results := map[string]string{}
			for line := range strings.Lines(p.output()) {
				rest, ok := strings.CutPrefix(strings.TrimSpace(line), "RESULT ")
				if !ok {
					continue
				}
				for _, name := range bodyCases {
					if outcome, ok := strings.CutPrefix(rest, name+" "); ok {
						results[name] = outcome
					}
				}
			}
			for _, name := range bodyCases {
				switch outcome, ok := results[name]; {
				case !ok:
					t.Errorf("%s: the script did not report it", name)
				case outcome != "ok":
					t.Errorf("%s: telegramtest refused %s's request: %s", name, fw, strings.TrimPrefix(outcome, "error "))
				}
			}

			captured := proxy.requests()
			var all strings.Builder
			for _, r := range captured {
				t.Logf("%s %s\n%s", r.method, r.contentType, r.body)
				all.WriteString(r.contentType + "\n" + r.body + "\n")
			}
			if len(captured) != len(bodyCases) {
				t.Errorf("captured %d calls, want %d (one per case)", len(captured), len(bodyCases))
			}
			for _, shape := range bodyShapes[fw] {
				if !strings.Contains(all.String(), shape) {
					t.Errorf("no body holds %q: the test no longer covers that shape of %s's", shape, fw)
				}
			}
		})
	}
}

// sendDirect sends a message as the bot, straight to srv, and returns its
// id.
func sendDirect(t *testing.T, srv *telegramtest.Server, params map[string]any) int64 {
	t.Helper()
	body, _ := json.Marshal(params)
	resp, err := srv.Client().Post(srv.URL+"/bot"+srv.Token+"/sendMessage", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		OK     bool `json:"ok"`
		Result struct {
			MessageID int64 `json:"message_id"`
		} `json:"result"`
		Description string `json:"description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || !a.OK {
		t.Fatalf("sendMessage: %v %s", err, a.Description)
	}
	return a.Result.MessageID
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// maxCapturedBody bounds one captured request body.
const maxCapturedBody = 1 << 20

// captureProxy passes every request on to a telegramtest server and keeps
// its body.
type captureProxy struct {
	srv  *telegramtest.Server
	mu   sync.Mutex
	reqs []capturedRequest
}

// capturedRequest is one call as it went over the wire.
type capturedRequest struct {
	method, contentType, body string
}

func (p *captureProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCapturedBody+1))
	if err != nil || len(body) > maxCapturedBody {
		http.Error(w, "capture proxy: body unreadable or over 1 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	p.mu.Lock()
	p.reqs = append(p.reqs, capturedRequest{
		method:      r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:],
		contentType: r.Header.Get("Content-Type"),
		body:        string(body),
	})
	p.mu.Unlock()
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.srv.URL+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		http.Error(w, "capture proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *captureProxy) requests() []capturedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]capturedRequest(nil), p.reqs...)
}
