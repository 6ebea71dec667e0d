package telegramtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

func TestFaults(t *testing.T) {
	t.Parallel()
	sendParams := func(f fixture) map[string]any { return map[string]any{"chat_id": f.chat.ID, "text": "hi"} }

	t.Run("connection faults", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			kind       telegramtest.FaultKind
			wantLedger int
		}{
			{telegramtest.FaultRefuseConnection, 0},
			{telegramtest.FaultReset, 0},
			{telegramtest.FaultClose, 0},
			{telegramtest.FaultDropBeforeEffect, 0},
			{telegramtest.FaultDropAfterEffect, 1},
		} {
			t.Run(string(tc.kind), func(t *testing.T) {
				t.Parallel()
				f := setup(t, noLimits())
				method := "sendMessage"
				if tc.kind == telegramtest.FaultRefuseConnection {
					method = ""
				}
				if err := f.srv.Arm(telegramtest.Fault{Method: method, Kind: tc.kind}); err != nil {
					t.Fatal(err)
				}
				if _, err := tryCall(t.Context(), f.srv, "sendMessage", sendParams(f)); err == nil {
					t.Fatalf("%s: the call succeeded", tc.kind)
				}
				if n := len(f.srv.Messages()); n != tc.wantLedger {
					t.Errorf("%s: ledger has %d messages, want %d", tc.kind, n, tc.wantLedger)
				}
				// Armed once: the next call goes through.
				wantOK(t, call(t, f.srv, "sendMessage", sendParams(f)))
			})
		}
	})

	t.Run("answers", func(t *testing.T) {
		t.Parallel()
		f := setup(t, noLimits())
		f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultServerError, Status: 502})
		wantError(t, call(t, f.srv, "sendMessage", sendParams(f)), 502, "Bad Gateway")
		f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultServerError})
		wantError(t, call(t, f.srv, "sendMessage", sendParams(f)), 500, "Internal Server Error")
		f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 7})
		a := call(t, f.srv, "sendMessage", sendParams(f))
		wantError(t, a, 429, "Too Many Requests: retry after 7")
		if a.Parameters.RetryAfter != 7 {
			t.Errorf("retry_after = %d", a.Parameters.RetryAfter)
		}
		f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultProxyError})
		resp, err := f.srv.Client().Post(f.srv.URL+"/bot"+f.srv.Token+"/sendMessage", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") || !bytes.Contains(body, []byte("<h1>502 Bad Gateway</h1>")) {
			t.Errorf("proxy error = %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if n := len(f.srv.Messages()); n != 0 {
			t.Errorf("error answers had an effect: %d messages", n)
		}
	})

	t.Run("slow and huge bodies apply the call", func(t *testing.T) {
		t.Parallel()
		f := setup(t, noLimits())
		f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultSlowBody, Stall: 10 * time.Millisecond})
		wantOK(t, call(t, f.srv, "sendMessage", sendParams(f)))
		f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultHugeBody, Size: 3 << 20})
		body, _ := jsonBody(sendParams(f))
		resp, err := f.srv.Client().Post(f.srv.URL+"/bot"+f.srv.Token+"/sendMessage", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n < 3<<20 || resp.ContentLength != n {
			t.Errorf("huge body = %d bytes (Content-Length %d), want over 3 MiB", n, resp.ContentLength)
		}
		if got := len(f.srv.Messages()); got != 2 {
			t.Errorf("ledger = %d, want 2", got)
		}
	})

	t.Run("hang until the client gives up", func(t *testing.T) {
		t.Parallel()
		f := setup(t, noLimits())
		f.srv.Arm(telegramtest.Fault{Method: "getMe", Kind: telegramtest.FaultHang})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := tryCall(ctx, f.srv, "getMe", nil)
			done <- err
		}()
		testkit.WaitFor(t, "the call to hang", func() bool { return f.srv.Inflight() == 1 })
		cancel()
		if err := recv(t, done, "the hung call to end"); !errors.Is(err, context.Canceled) {
			t.Errorf("hung call = %v, want context.Canceled", err)
		}
		testkit.WaitFor(t, "the server to let go of the call", func() bool { return f.srv.Inflight() == 0 })
	})

	t.Run("nth and times", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, noLimits())
		srv.Arm(telegramtest.Fault{Method: "getme", Kind: telegramtest.FaultServerError, Nth: 2, Times: 2})
		var got []int
		for range 5 {
			got = append(got, call(t, srv, "getMe", nil).Status)
		}
		if fmt.Sprint(got) != "[200 500 500 200 200]" {
			t.Errorf("statuses = %v, want [200 500 500 200 200]", got)
		}
		srv.Arm(telegramtest.Fault{Kind: telegramtest.FaultServerError, Times: -1})
		for range 3 {
			if a := call(t, srv, "getWebhookInfo", nil); a.Status != 500 {
				t.Errorf("Times -1: status %d", a.Status)
			}
		}
		srv.Disarm()
		wantOK(t, call(t, srv, "getMe", nil))
	})

	t.Run("latency", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, telegramtest.Config{Faults: []telegramtest.Fault{{Method: "getMe", Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond}}})
		start := time.Now()
		wantOK(t, call(t, srv, "getMe", nil))
		// A lower bound only: the delay must have been applied.
		if d := time.Since(start); d < 20*time.Millisecond {
			t.Errorf("getMe took %v, want at least the 20 ms delay", d)
		}
	})
}

func jsonBody(v map[string]any) (io.Reader, error) {
	var b bytes.Buffer
	fmt.Fprint(&b, "{")
	first := true
	for k, x := range v {
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, "%q:%q", k, fmt.Sprint(x))
	}
	b.WriteString("}")
	return &b, nil
}

func TestCloseEndsHungRequests(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(telegramtest.Config{})
	srv.Arm(telegramtest.Fault{Method: "getMe", Kind: telegramtest.FaultHang})
	done := make(chan error, 1)
	go func() {
		_, err := tryCall(t.Context(), srv, "getMe", nil)
		done <- err
	}()
	testkit.WaitFor(t, "the call to hang", func() bool { return srv.Inflight() == 1 })
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	recv(t, closed, "Close to return")
	if err := recv(t, done, "the hung call to end"); err == nil {
		t.Error("the hung call got an answer")
	}
	srv.Close() // idempotent
}

func TestCloseLogsTheRequestItWaitsFor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lines []string
	logged := make(chan struct{}, 1)
	srv := telegramtest.NewUnstartedServer(telegramtest.Config{Logf: func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
		select {
		case logged <- struct{}{}:
		default:
		}
	}})
	release := make(chan struct{})
	entered := make(chan struct{})
	srv.SetCallHook(func(method string) {
		if method == "sendMessage" {
			close(entered)
			<-release // a call that ignores Close, so that Close has to wait
		}
	})
	srv.SetCloseWarnAfter(time.Millisecond)
	srv.Start()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tryCall(context.Background(), srv, "sendMessage", map[string]any{"chat_id": 1, "text": "x"})
	}()
	recv(t, entered, "the call to start")
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	recv(t, logged, "Close's log line")
	select {
	case <-closed:
		t.Fatal("Close returned while a call was outstanding")
	default:
	}
	close(release)
	recv(t, closed, "Close to return")
	recv(t, done, "the call to end")
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(lines[0], "sendMessage") || !strings.Contains(lines[0], "#1") {
		t.Errorf("log = %q, want it to name the sendMessage call", lines[0])
	}
	for _, l := range lines {
		if strings.Contains(l, srv.Token) {
			t.Errorf("log line contains the token: %q", l)
		}
	}
}

func TestHTTPClientSeesRefusedConnectionBeforeResponse(t *testing.T) {
	t.Parallel()
	srv := newServer(t, telegramtest.Config{Faults: []telegramtest.Fault{{Kind: telegramtest.FaultRefuseConnection, Times: 2}}})
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer c.CloseIdleConnections()
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/bot"+srv.Token+"/getMe", nil)
		if _, err := do(c, req); err == nil {
			t.Fatal("refused connection answered")
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/bot"+srv.Token+"/getMe", nil)
	a, err := do(c, req)
	if err != nil || !a.OK {
		t.Fatalf("third connection: %v %+v", err, a)
	}
	if n := srv.Calls()["getMe"]; n != 1 {
		t.Errorf("getMe served %d times, want 1 (refused connections serve nothing)", n)
	}
}

func TestCloseDoesNotWaitForAClientThatStoppedReading(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(telegramtest.Config{})
	srv.Arm(telegramtest.Fault{Method: "getMe", Kind: telegramtest.FaultHugeBody, Size: 256 << 20})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /bot%s/getMe HTTP/1.1\r\nHost: x\r\n\r\n", srv.Token)
	// The client never reads: the server's writes block once the socket
	// buffers are full.
	testkit.WaitFor(t, "the call to start", func() bool { return srv.Inflight() == 1 })
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	recv(t, closed, "Close to return")
}
