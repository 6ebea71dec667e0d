package botapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

// realToken has the shape of a real bot token, so both the exact and the
// shape-based masking apply to it.
const realToken = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"

// shortToken is masked only as the client's own exact token.
const shortToken = "1:s3cr3t"

// secretOf returns the part of a token that must never appear.
func secretOf(token string) string { return token[strings.IndexByte(token, ':')+1:] }

// newServer starts an httptest server with handler and returns a client
// pointed at it.
func newServer(t *testing.T, token string, handler http.HandlerFunc) (*botapi.Client, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	c, err := botapi.New(token, botapi.Config{APIRoot: srv.URL + "/", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, srv
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func TestCallSuccess(t *testing.T) {
	t.Parallel()
	type got struct {
		path, contentType string
		body              map[string]any
	}
	seen := make(chan got, 1)
	c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		seen <- got{r.Method + " " + r.URL.Path, r.Header.Get("Content-Type"), body}
		writeJSON(w, 200, map[string]any{"ok": true, "result": map[string]any{"message_id": 42}})
	})
	raw, err := c.Call(t.Context(), "sendMessage", map[string]any{"chat_id": 7, "text": "hi"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	var msg struct {
		MessageID int `json:"message_id"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.MessageID != 42 {
		t.Fatalf("result = %s (%v), want message_id 42", raw, err)
	}
	g := <-seen
	if want := "POST /bot" + realToken + "/sendMessage"; g.path != want {
		t.Errorf("request = %q, want %q (trailing slash of the root stripped)", g.path, want)
	}
	if g.contentType != "application/json" {
		t.Errorf("Content-Type = %q", g.contentType)
	}
	if g.body["text"] != "hi" || g.body["chat_id"] != float64(7) {
		t.Errorf("body = %v", g.body)
	}
}

func TestCallNilParamsSendsEmptyObject(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 1)
	c, _ := newServer(t, shortToken, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- string(b)
		writeJSON(w, 200, map[string]any{"ok": true})
	})
	raw, err := c.Call(t.Context(), "getMe", nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if string(raw) != "null" {
		t.Errorf("missing result = %s, want null", raw)
	}
	if b := <-seen; b != "{}" {
		t.Errorf("body = %q, want {}", b)
	}
}

func TestCallAPIRootWithPathPrefix(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Path
		writeJSON(w, 200, map[string]any{"ok": true, "result": true})
	}))
	t.Cleanup(srv.Close)
	c, err := botapi.New(shortToken, botapi.Config{APIRoot: srv.URL + "/tg///", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), "getMe", nil); err != nil {
		t.Fatal(err)
	}
	if p := <-seen; p != "/tg/bot"+shortToken+"/getMe" {
		t.Errorf("path = %q", p)
	}
}

func TestCallRefusal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		answer map[string]any
		want   botapi.APIError
		reason botapi.Reason
	}{
		{"429 with retry_after", 429,
			map[string]any{"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3", "parameters": map[string]any{"retry_after": 3}},
			botapi.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests: retry after 3", RetryAfter: 3 * time.Second},
			botapi.ReasonRateLimited},
		{"migrated group", 400,
			map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: group chat was upgraded to a supergroup chat", "parameters": map[string]any{"migrate_to_chat_id": int64(-1001234567890123)}},
			botapi.APIError{Method: "sendMessage", Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateToChatID: -1001234567890123},
			botapi.ReasonChatMigrated},
		{"blocked", 403,
			map[string]any{"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"},
			botapi.APIError{Method: "sendMessage", Code: 403, Description: "Forbidden: bot was blocked by the user"},
			botapi.ReasonBlockedByUser},
		{"no error_code uses the HTTP status", 500,
			map[string]any{"ok": false, "description": "Internal Server Error"},
			botapi.APIError{Method: "sendMessage", Code: 500, Description: "Internal Server Error"},
			botapi.ReasonServerError},
		{"wrong types fall back", 418,
			map[string]any{"ok": false, "error_code": "x", "description": 5, "parameters": map[string]any{"retry_after": -4, "migrate_to_chat_id": "no"}},
			botapi.APIError{Method: "sendMessage", Code: 418, Description: "no description"},
			botapi.ReasonUnrecognized},
		{"huge retry_after is clamped", 429,
			map[string]any{"ok": false, "error_code": 429, "description": "Too Many Requests", "parameters": map[string]any{"retry_after": 1e300}},
			botapi.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests", RetryAfter: botapi.MaxRetryAfter},
			botapi.ReasonRateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, tt.status, tt.answer)
			})
			_, err := c.Call(t.Context(), "sendMessage", map[string]any{"chat_id": 1, "text": "x"})
			var ae *botapi.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T) is not an *APIError", err, err)
			}
			if *ae != tt.want {
				t.Errorf("APIError = %+v\nwant       %+v", *ae, tt.want)
			}
			if r := botapi.Classify(err).Reason; r != tt.reason {
				t.Errorf("Classify reason = %s, want %s", r, tt.reason)
			}
			wantMsg := fmt.Sprintf("telegram: sendMessage failed: %d %s", tt.want.Code, tt.want.Description)
			if err.Error() != wantMsg {
				t.Errorf("Error() = %q, want %q", err.Error(), wantMsg)
			}
		})
	}
}

func TestCallNotJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		reason botapi.Reason
	}{
		{"proxy 502 page", 502, "<html><body>502 Bad Gateway</body></html>", botapi.ReasonUnknown},
		{"empty 503", 503, "", botapi.ReasonUnknown},
		{"200 garbage", 200, "ok", botapi.ReasonUnknown},
		{"JSON but not an object", 500, `"oops"`, botapi.ReasonUnknown},
		{"truncated JSON", 502, `{"ok":false,"error_code":502`, botapi.ReasonUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			_, err := c.Call(t.Context(), "sendMessage", nil)
			var ae *botapi.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T) is not an *APIError", err, err)
			}
			if !ae.NotJSON || ae.Code != tt.status || !strings.Contains(ae.Description, "not JSON") {
				t.Errorf("APIError = %+v, want NotJSON with code %d", *ae, tt.status)
			}
			f := botapi.Classify(err)
			if f.Reason != tt.reason || f.Retryable {
				t.Errorf("Classify = %+v, want %s and not retryable", f, tt.reason)
			}
		})
	}
}

func TestCallTelegram5xxIsRetryable(t *testing.T) {
	t.Parallel()
	c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 502, map[string]any{"ok": false, "error_code": 502, "description": "Bad Gateway"})
	})
	_, err := c.Call(t.Context(), "sendMessage", nil)
	if f := botapi.Classify(err); f.Reason != botapi.ReasonServerError || !f.Retryable {
		t.Errorf("Classify = %+v, want retryable server-error", f)
	}
}

// patternReader yields n pseudo-random bytes without being a *bytes.Reader,
// so the HTTP client cannot know the length in advance.
type onlyReader struct{ io.Reader }

func TestCallMultipartStreamed(t *testing.T) {
	t.Parallel()
	content := make([]byte, 3<<20)
	_, _ = rand.Read(content)
	type got struct {
		contentLength int64
		fields        map[string]string
		fileName      string
		file          []byte
		err           error
	}
	seen := make(chan got, 1)
	c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		g := got{contentLength: r.ContentLength, fields: map[string]string{}}
		mr, err := r.MultipartReader()
		if err != nil {
			g.err = err
		}
		for err == nil {
			var p interface {
				io.Reader
				FormName() string
				FileName() string
			}
			p, err = mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			if p.FileName() != "" {
				g.fileName, g.file = p.FormName()+"/"+p.FileName(), b
			} else {
				g.fields[p.FormName()] = string(b)
			}
		}
		if err != io.EOF {
			g.err = err
		}
		seen <- g
		writeJSON(w, 200, map[string]any{"ok": true, "result": map[string]any{"message_id": 9}})
	})
	_, err := c.Call(t.Context(), "sendDocument", map[string]any{
		"chat_id":      int64(-100123),
		"caption":      "report",
		"document":     botapi.InputFile{Name: "report.bin", Reader: onlyReader{bytes.NewReader(content)}},
		"reply_markup": map[string]any{"inline_keyboard": []any{}},
		"skipped":      nil,
	})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	g := <-seen
	if g.err != nil {
		t.Fatalf("server could not read the form: %v", g.err)
	}
	if g.contentLength != -1 {
		t.Errorf("ContentLength = %d, want -1 (streamed, length unknown in advance)", g.contentLength)
	}
	if g.fileName != "document/report.bin" || !bytes.Equal(g.file, content) {
		t.Errorf("file part %q with %d bytes, want document/report.bin with the %d bytes sent", g.fileName, len(g.file), len(content))
	}
	want := map[string]string{"chat_id": "-100123", "caption": "report", "reply_markup": `{"inline_keyboard":[]}`}
	if fmt.Sprint(g.fields) != fmt.Sprint(want) {
		t.Errorf("fields = %v, want %v", g.fields, want)
	}
}

func TestCallMultipartReaderError(t *testing.T) {
	t.Parallel()
	c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, 200, map[string]any{"ok": true})
	})
	boom := errors.New("disk gone")
	_, err := c.Call(t.Context(), "sendDocument", map[string]any{
		"document": &botapi.InputFile{Reader: io.MultiReader(strings.NewReader("part"), errReader{boom})},
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want it to wrap the reader's error", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestCallInputFileInsideJSONIsRefused(t *testing.T) {
	t.Parallel()
	c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		t.Error("no request must be sent")
	})
	params := struct {
		Document botapi.InputFile `json:"document"`
	}{botapi.InputFile{Reader: strings.NewReader("x")}}
	if _, err := c.Call(t.Context(), "sendDocument", params); err == nil {
		t.Fatal("an InputFile inside a struct was encoded as JSON")
	}
}

func TestCallContextCancel(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client going away
		close(arrived)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := c.Call(ctx, "sendMessage", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled in the chain", err)
	}
	var re *botapi.RequestError
	if !errors.As(err, &re) || re.Method != "sendMessage" {
		t.Fatalf("err = %T %v, want *RequestError for sendMessage", err, err)
	}
	if strings.Contains(err.Error(), secretOf(realToken)) {
		t.Errorf("error leaks the token: %q", err)
	}
	if f := botapi.Classify(err); f.Reason != botapi.ReasonUnknown {
		t.Errorf("a cancelled sent request classified %s, want unknown", f.Reason)
	}
}

// TestCallMultipartBlockedReaderCancel: a file whose Read blocks does not
// keep Call from returning when ctx ends.
func TestCallMultipartBlockedReaderCancel(t *testing.T) {
	t.Parallel()
	c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	})
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() }) // ends the blocked Read, so no goroutine leaks
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		_, _ = pw.Write([]byte("first chunk"))
		cancel()
	}()
	_, err := c.Call(ctx, "sendDocument", map[string]any{"document": botapi.InputFile{Reader: pr}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestCallResponseTooLarge(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"ok": true, "result": strings.Repeat("x", 200)})
	}))
	t.Cleanup(srv.Close)
	c, err := botapi.New(realToken, botapi.Config{APIRoot: srv.URL, HTTPClient: srv.Client(), MaxResponseBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(t.Context(), "getUpdates", nil)
	if !errors.Is(err, botapi.ErrResponseTooLarge) {
		t.Fatalf("err = %v, want ErrResponseTooLarge", err)
	}
	if f := botapi.Classify(err); f.Reason != botapi.ReasonUnknown || f.Retryable {
		t.Errorf("Classify = %+v, want unknown: the request was sent", f)
	}
	// Exactly at the limit is fine.
	body := `{"ok":true,"result":"` + strings.Repeat("y", 100-len(`{"ok":true,"result":""}`)) + `"}`
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	t.Cleanup(srv2.Close)
	c2, _ := botapi.New(realToken, botapi.Config{APIRoot: srv2.URL, HTTPClient: srv2.Client(), MaxResponseBytes: int64(len(body))})
	if _, err := c2.Call(t.Context(), "getUpdates", nil); err != nil {
		t.Errorf("answer of exactly MaxResponseBytes: %v", err)
	}
}

// notDispatchedTransport is a RoundTripper that fails every request before
// writing it, marking the error the way transport's *NotDispatchedError does.
type notDispatchedTransport struct{}

func (notDispatchedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, &notDispatchedError{}
}

func TestCallNotDispatchedPassesThrough(t *testing.T) {
	t.Parallel()
	c, err := botapi.New(realToken, botapi.Config{HTTPClient: &http.Client{Transport: notDispatchedTransport{}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(t.Context(), "sendMessage", nil)
	var nd *notDispatchedError
	if !errors.As(err, &nd) {
		t.Fatalf("err = %T %v, want the transport's not-dispatched error in the chain", err, err)
	}
	if !strings.Contains(err.Error(), "not dispatched") {
		t.Errorf("message %q does not say not dispatched", err)
	}
	if f := botapi.Classify(err); f.Reason != botapi.ReasonNotDispatched || !f.Retryable {
		t.Errorf("Classify = %+v, want retryable not-dispatched", f)
	}
}

// leakyTransport fails with an error that prints the whole request URL.
type leakyTransport struct{}

func (leakyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, fmt.Errorf("cannot reach %s (escaped %s)", req.URL.String(), req.URL.EscapedPath())
}

// TestTokenNeverInErrors runs every failure mode with a token in the URL and
// checks the error's message in all the ways it is commonly printed.
func TestTokenNeverInErrors(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	echo := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 400, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: token " + r.URL.Path})
	}
	redirectLoop := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.String(), http.StatusTemporaryRedirect)
	}
	hijackClose := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	huge := func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("{", 1000))
	}
	html := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(502)
		io.WriteString(w, "<html>"+r.URL.Path+"</html>")
	}
	type mode struct {
		name    string
		handler http.HandlerFunc // nil: use root
		root    string
		client  *http.Client
		timeout time.Duration
	}
	modes := []mode{
		{name: "connection refused", root: closedURL},
		{name: "description echoes the URL", handler: echo},
		{name: "redirect loop", handler: redirectLoop},
		{name: "connection closed without answer", handler: hijackClose},
		{name: "response too large", handler: huge},
		{name: "not JSON echoing the URL", handler: html},
		{name: "transport error holding the URL", root: "http://127.0.0.1:1", client: &http.Client{Transport: leakyTransport{}}},
		{name: "deadline exceeded", handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}, timeout: time.Millisecond},
	}
	for _, token := range []string{realToken, shortToken} {
		for _, m := range modes {
			t.Run(token[:3]+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				root, client := m.root, m.client
				if m.handler != nil {
					srv := httptest.NewServer(m.handler)
					t.Cleanup(srv.Close)
					root, client = srv.URL, srv.Client()
				}
				if client == nil {
					client = &http.Client{}
				}
				c, err := botapi.New(token, botapi.Config{APIRoot: root, HTTPClient: client, MaxResponseBytes: 512})
				if err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				if m.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, m.timeout)
					defer cancel()
				}
				_, err = c.Call(ctx, "sendMessage", map[string]any{"text": "x"})
				if err == nil {
					t.Fatal("want an error")
				}
				for _, s := range []string{err.Error(), fmt.Sprint(err), fmt.Sprintf("%+v", err), fmt.Sprintf("%q", err)} {
					if strings.Contains(s, secretOf(token)) {
						t.Errorf("error leaks the token: %s", s)
					}
				}
			})
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tokens := []string{"", "123:abc/def", "123:abc?x", "123 456:abc", "123:abc\n", strings.Repeat("1", botapi.MaxTokenBytes+1)}
	for _, tok := range tokens {
		if _, err := botapi.New(tok, botapi.Config{}); !errors.Is(err, botapi.ErrInvalidToken) {
			t.Errorf("New(%q) err = %v, want ErrInvalidToken", tok, err)
		} else if tok != "" && strings.Contains(err.Error(), tok) {
			t.Errorf("error %q repeats the token", err)
		}
	}
	configs := []struct {
		cfg   botapi.Config
		field string
	}{
		{botapi.Config{APIRoot: "ftp://example.org"}, "APIRoot"},
		{botapi.Config{APIRoot: "api.telegram.org"}, "APIRoot"},
		{botapi.Config{APIRoot: "https://user:pw@example.org"}, "APIRoot"},
		{botapi.Config{APIRoot: "https://example.org/?q=1"}, "APIRoot"},
		{botapi.Config{APIRoot: "http://[::1"}, "APIRoot"},
		{botapi.Config{MaxResponseBytes: -1}, "MaxResponseBytes"},
	}
	for _, tt := range configs {
		_, err := botapi.New(realToken, tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) err = %v, want one naming %s", tt.cfg, err, tt.field)
		}
	}
	if _, err := botapi.New(realToken, botapi.Config{APIRoot: "http://127.0.0.1:8081/"}); err != nil {
		t.Errorf("local Bot API server root refused: %v", err)
	}
}

func TestCallInvalidMethod(t *testing.T) {
	t.Parallel()
	c, _ := newServer(t, realToken, func(w http.ResponseWriter, r *http.Request) {
		t.Error("no request must be sent")
	})
	for _, m := range []string{"", "send/Message", "../getMe", "a b", strings.Repeat("m", botapi.MaxMethodBytes+1)} {
		if _, err := c.Call(t.Context(), m, nil); !errors.Is(err, botapi.ErrInvalidMethod) {
			t.Errorf("Call(%q) err = %v, want ErrInvalidMethod", m, err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"GET /bot" + realToken + "/getMe", "GET /bot1234567890:[redacted]/getMe"},
		{"two " + realToken + " and " + realToken, "two 1234567890:[redacted] and 1234567890:[redacted]"},
		{"1234:" + strings.Repeat("a", 40), "1234:" + strings.Repeat("a", 40)},   // bot id too short
		{"12345:" + strings.Repeat("a", 29), "12345:" + strings.Repeat("a", 29)}, // secret too short
		{"12345:" + strings.Repeat("a", 30), "12345:[redacted]"},
		{"no token here", "no token here"},
	}
	for _, tt := range tests {
		if got := botapi.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	c, err := botapi.New(shortToken, botapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	in := "url /bot" + shortToken + "/x escaped /bot1%3As3cr3t/x and shaped " + realToken
	want := "url /bot1:[redacted]/x escaped /bot1:[redacted]/x and shaped 1234567890:[redacted]"
	if got := c.Redact(in); got != want {
		t.Errorf("Client.Redact = %q\nwant %q", got, want)
	}
}

// Reference §5.5 case 7: a transport failure whose message holds the token
// URL becomes an error that names the method and not the token.
func TestTransportFailureNamesMethod(t *testing.T) {
	t.Parallel()
	c, err := botapi.New(realToken, botapi.Config{HTTPClient: &http.Client{Transport: leakyTransport{}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(t.Context(), "getMe", nil)
	if err == nil || !strings.Contains(err.Error(), "getMe") || strings.Contains(err.Error(), secretOf(realToken)) {
		t.Errorf("err = %v, want one naming getMe without the token", err)
	}
	if !strings.Contains(err.Error(), "1234567890:[redacted]") {
		t.Errorf("err = %v, want the redacted URL kept readable", err)
	}
}
