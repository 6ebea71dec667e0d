package telegramtest

import (
	"cmp"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
)

// Server is a fake Telegram Bot API server on a real loopback socket, in the
// manner of httptest.Server. Create it with [NewServer], or with
// [NewUnstartedServer] to change [Server.Config] first, and stop it with
// [Server.Close]. Once started, its methods are safe for concurrent use.
type Server struct {
	// URL is the Bot API root, with no trailing slash; a call goes to
	// URL + "/bot" + Token + "/" + method. Set by Start.
	URL string
	// Token is the bot token the server accepts. Set by Start.
	Token string
	// Config may be changed between NewUnstartedServer and Start, and not
	// after: Start copies it.
	Config Config

	ts       *httptest.Server
	listener net.Listener
	sw       *switchListener
	cfg      Config
	botID    int64
	now      func() time.Time
	logf     func(string, ...any)
	hookCall func(method string) // test hook, run at the start of every Bot API call

	closeWarnAfter time.Duration
	ctx            context.Context // cancelled by Close: ends every server-side wait
	cancel         context.CancelFunc
	wg             sync.WaitGroup // webhook dispatcher and deliveries
	webhookClient  *http.Client
	ownClient      bool
	closeOnce      sync.Once

	mu sync.Mutex
	st state
	// changed is closed and replaced whenever updates or the webhook
	// change; long polls and the webhook dispatcher wait on it.
	changed chan struct{}
	// events is closed and replaced whenever the ledger changes or a call
	// ends; WaitMessages and WaitSettled wait on it.
	events  chan struct{}
	reqs    map[uint64]inflightReq
	nextReq uint64
	rng     *rand.Rand
}

// inflightReq is a Bot API call being served, for Close's log.
type inflightReq struct {
	method string
	start  time.Time
}

// NewServer starts and returns a new server. The caller should call Close
// when finished (t.Cleanup(srv.Close)). It panics if it cannot listen or if
// cfg is invalid (see [Config.Validate]): both are setup errors in a test.
func NewServer(cfg Config) *Server {
	s := NewUnstartedServer(cfg)
	s.Start()
	return s
}

// NewUnstartedServer returns a new server listening on a system-chosen
// loopback port but not yet serving. The caller may change [Server.Config]
// and then calls [Server.Start] or [Server.StartTLS]. It panics if it cannot
// listen.
func NewUnstartedServer(cfg Config) *Server {
	return NewUnstartedServerOn(cfg, nil)
}

// NewUnstartedServerOn is like [NewUnstartedServer] but serves on l when l
// is not nil (tgrelay sandbox listens on a chosen address this way). The
// server owns l and closes it.
func NewUnstartedServerOn(cfg Config, l net.Listener) *Server {
	s := &Server{Config: cfg, closeWarnAfter: 5 * time.Second}
	if l == nil {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			if l, err = net.Listen("tcp6", "[::1]:0"); err != nil {
				panic(fmt.Sprintf("telegramtest: failed to listen on a port: %v", err))
			}
		}
	}
	s.listener = l
	return s
}

// Start starts serving plain HTTP. It panics if [Server.Config] is invalid
// or the server was already started.
func (s *Server) Start() { s.start(false) }

// StartTLS starts serving HTTPS with a self-signed certificate that
// [Server.Client] trusts. It panics like Start.
func (s *Server) StartTLS() { s.start(true) }

func (s *Server) start(useTLS bool) {
	if s.ts != nil {
		panic("telegramtest: Server already started")
	}
	if err := s.Config.Validate(); err != nil {
		panic(err.Error())
	}
	s.cfg = s.Config.withDefaults()
	seed := s.cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s.now = s.cfg.NowFunc
	if s.now == nil {
		s.now = time.Now
	}
	s.logf = s.cfg.Logf
	if s.logf == nil {
		s.logf = log.Printf
	}
	s.Token = s.cfg.Token
	if s.Token == "" {
		s.Token = randomToken(s.rng)
	}
	s.botID = botIDOf(s.Token)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.changed = make(chan struct{})
	s.events = make(chan struct{})
	s.reqs = map[uint64]inflightReq{}
	s.st = newState(s.cfg.Limits)
	for _, f := range s.cfg.Faults {
		if f.Kind != FaultUnreachable {
			s.st.faults = append(s.st.faults, &armedFault{Fault: f})
		}
	}
	s.webhookClient = s.cfg.Webhook.Client
	if s.webhookClient == nil {
		s.ownClient = true
		s.webhookClient = &http.Client{Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, // webhook targets in tests are self-signed
			MaxIdleConnsPerHost: 100,
		}}
	}
	s.sw = newSwitchListener(s, s.listener)
	s.ts = &httptest.Server{
		Listener: s.sw,
		Config: &http.Server{
			Handler:   http.HandlerFunc(s.serveHTTP),
			ErrorLog:  log.New(io.Discard, "", 0),
			ConnState: s.sw.connState,
		},
	}
	if useTLS {
		s.ts.StartTLS()
	} else {
		s.ts.Start()
	}
	s.URL = s.ts.URL
	for _, f := range s.cfg.Faults {
		if f.Kind == FaultUnreachable {
			s.sw.outage(cmp.Or(f.Duration, DefaultFaultOutage))
		}
	}
	s.wg.Add(1)
	go s.dispatchWebhooks()
}

// Certificate returns the certificate served after StartTLS, or nil. It
// must be called after Start.
func (s *Server) Certificate() *x509.Certificate { return s.ts.Certificate() }

// Client returns an HTTP client that trusts the server (also after
// StartTLS). Close closes its idle connections. It must be called after
// Start.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Close stops the server: it closes the listener, ends every server-side
// wait (long polls, armed hangs and delays), cancels webhook deliveries and
// blocks until outstanding requests finish. If that takes longer than 5 s
// it logs which calls it is waiting for. Close is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.ts == nil {
			s.listener.Close()
			return
		}
		s.cancel()
		stop := make(chan struct{})
		go func() {
			t := time.NewTimer(s.closeWarnAfter)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					s.logf("telegramtest: Close is waiting for outstanding requests: %s", s.describeInflight())
					t.Reset(s.closeWarnAfter)
				}
			}
		}()
		s.ts.Close()
		s.wg.Wait()
		close(stop)
		if s.ownClient {
			s.webhookClient.CloseIdleConnections()
		}
	})
}

func (s *Server) describeInflight() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return "none (connections still closing)"
	}
	ids := make([]uint64, 0, len(s.reqs))
	for id := range s.reqs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		r := s.reqs[id]
		fmt.Fprintf(&b, "#%d %s (for %s)", id, r.method, time.Since(r.start).Round(time.Millisecond))
	}
	return b.String()
}

func (s *Server) track(method string) func() {
	s.mu.Lock()
	s.nextReq++
	id := s.nextReq
	s.reqs[id] = inflightReq{method: method, start: time.Now()}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.reqs, id)
		s.pokeLocked()
		s.mu.Unlock()
	}
}

// wakeLocked wakes every long poll and the webhook dispatcher.
func (s *Server) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// apiError is a refusal in Telegram's words.
type apiError struct {
	code       int
	desc       string
	retryAfter int
	migrateTo  int64
}

func badRequest(desc string) *apiError { return &apiError{code: 400, desc: "Bad Request: " + desc} }
func forbidden(desc string) *apiError  { return &apiError{code: 403, desc: "Forbidden: " + desc} }

type respParams struct {
	MigrateToChatID int64 `json:"migrate_to_chat_id,omitempty"`
	RetryAfter      int   `json:"retry_after,omitempty"`
}

type envelope struct {
	OK          bool        `json:"ok"`
	Result      any         `json:"result,omitempty"`
	ErrorCode   int         `json:"error_code,omitempty"`
	Description string      `json:"description,omitempty"`
	Parameters  *respParams `json:"parameters,omitempty"`
}

// described is a result that Telegram answers with a description too.
type described struct {
	result any
	desc   string
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = 500, []byte(`{"ok":false,"error_code":500,"description":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(code)
	w.Write(b)
}

// noteRetryLocked remembers the retry a 429 asks for, for WaitSettled.
func (s *Server) noteRetryLocked(e *apiError) {
	if e.code == 429 && e.retryAfter > 0 {
		if t := time.Now().Add(time.Duration(e.retryAfter) * time.Second); t.After(s.st.retryUntil) {
			s.st.retryUntil = t
		}
	}
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	env := envelope{ErrorCode: e.code, Description: e.desc}
	if e.retryAfter > 0 || e.migrateTo != 0 {
		env.Parameters = &respParams{RetryAfter: e.retryAfter, MigrateToChatID: e.migrateTo}
	}
	writeJSON(w, e.code, env)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.sw.handlers.Add(1)
	defer s.sw.handlers.Add(-1)
	if s.cfg.ControlAPI && strings.HasPrefix(r.URL.Path, ControlPrefix) {
		s.serveControl(w, r)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		s.serveFile(w, r, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || method == "" || strings.Contains(method, "/") {
		writeAPIError(w, &apiError{code: 404, desc: "Not Found"})
		return
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.Token)) != 1 {
		writeAPIError(w, &apiError{code: 401, desc: "Unauthorized"})
		return
	}
	defer s.track(method)()
	if s.hookCall != nil {
		s.hookCall(method)
	}
	f := s.takeFault(method)
	if f != nil && s.faultBefore(w, r, f) {
		return
	}
	if !knownMethod(method) {
		writeAPIError(w, notImplemented(method))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxRequestBytes+1))
	if err != nil {
		return // the client went away
	}
	if int64(len(body)) > s.cfg.MaxRequestBytes {
		writeAPIError(w, &apiError{code: 413, desc: "Request Entity Too Large"})
		return
	}
	if f != nil && f.Kind == FaultDropBeforeEffect {
		hijackClose(w, false)
		return
	}
	p, err := parseParams(r.Header.Get("Content-Type"), r.URL.RawQuery, body)
	if err != nil {
		writeAPIError(w, badRequest(strings.TrimPrefix(err.Error(), "telegramtest: ")))
		return
	}
	s.mu.Lock()
	s.st.calls[method]++
	s.mu.Unlock()
	res, apiErr := s.call(r.Context(), method, p)
	if f != nil && f.Kind == FaultDropAfterEffect {
		hijackClose(w, false)
		return
	}
	if apiErr != nil {
		if apiErr.code == 429 {
			s.mu.Lock()
			s.noteRetryLocked(apiErr)
			s.mu.Unlock()
		}
		writeAPIError(w, apiErr)
		return
	}
	env := envelope{OK: true, Result: res}
	if d, ok := res.(described); ok {
		env.Result, env.Description = d.result, d.desc
	}
	if f != nil && (f.Kind == FaultSlowBody || f.Kind == FaultHugeBody) {
		s.faultAnswer(r.Context(), w, f, env)
		return
	}
	writeJSON(w, 200, env)
}

// hijackClose takes the connection and closes it without an answer; with
// reset it sends a TCP RST instead of a FIN.
func hijackClose(w http.ResponseWriter, reset bool) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream instead
	}
	if reset {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
	}
	c.Close()
}

// errClosed is returned by waits that Close ended.
var errClosed = errors.New("telegramtest: server closed")

// sleep waits d, or less when ctx or the server ends first.
func (s *Server) sleep(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.ctx, func() { cancel(errClosed) })()
	return backoff.Sleep(ctx, d)
}
