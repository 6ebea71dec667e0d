package main

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// sendFixture is a sandbox with one user and their private chat.
type sendFixture struct {
	srv  *telegramtest.Server
	user telegramtest.User
	chat telegramtest.Chat
}

func newSendFixture(t *testing.T) sendFixture {
	t.Helper()
	srv := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, Logf: t.Logf})
	t.Cleanup(srv.Close)
	u := srv.NewUser("Ada")
	c, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	return sendFixture{srv: srv, user: u, chat: c}
}

// runSendCapture runs send and returns its output and exit code as run
// would give them (exitCodeError's code, 1 for other errors).
func runSendCapture(t *testing.T, token string, args ...string) (out string, code int, err error) {
	t.Helper()
	var buf bytes.Buffer
	err = runSend(t.Context(), append(args, "--token", token), &buf, &buf)
	code = exitOK
	if err != nil {
		code = exitError
		var ec *exitCodeError
		if errors.As(err, &ec) {
			code = ec.ExitCode()
		}
		buf.WriteString(err.Error())
	}
	if strings.Contains(buf.String(), token) {
		t.Errorf("the token appears in the output:\n%s", buf.String())
	}
	return buf.String(), code, err
}

func TestSendOutcomes(t *testing.T) {
	t.Parallel()

	t.Run("answered", func(t *testing.T) {
		t.Parallel()
		fx := newSendFixture(t)
		out, code, _ := runSendCapture(t, fx.srv.Token, "--api-root", fx.srv.URL, "--chat", strconv.FormatInt(fx.chat.ID, 10), "--text", "<b>hello</b>", "--html")
		msgs := fx.srv.MessagesTo(fx.chat.ID)
		if code != exitSendAnswered || len(msgs) != 1 || !strings.Contains(out, "answered: message_id "+strconv.FormatInt(msgs[0].MessageID, 10)) {
			t.Errorf("exit %d, ledger %+v, output:\n%s", code, msgs, out)
		}
	})

	t.Run("refused blocked", func(t *testing.T) {
		t.Parallel()
		fx := newSendFixture(t)
		if err := fx.srv.SetBlocked(fx.user, true); err != nil {
			t.Fatal(err)
		}
		out, code, _ := runSendCapture(t, fx.srv.Token, "--api-root", fx.srv.URL, "--chat", strconv.FormatInt(fx.chat.ID, 10), "--text", "hi")
		if code != exitSendRefused || !strings.Contains(out, "refused: blocked-by-user (403") || !strings.Contains(out, "unreachable") {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
	})

	t.Run("refused bad html", func(t *testing.T) {
		t.Parallel()
		fx := newSendFixture(t)
		out, code, _ := runSendCapture(t, fx.srv.Token, "--api-root", fx.srv.URL, "--chat", strconv.FormatInt(fx.chat.ID, 10), "--text", "<b>open", "--html")
		if code != exitSendRefused || !strings.Contains(out, "refused: message-invalid (400") {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
	})

	t.Run("not dispatched", func(t *testing.T) {
		t.Parallel()
		// A port nobody listens on refuses the connection: nothing was sent.
		addr := closedport.Addr(t)
		out, code, _ := runSendCapture(t, "123456:"+strings.Repeat("A", 35), "--api-root", "http://"+addr, "--chat", "1", "--text", "hi")
		if code != exitSendNotDispatched || !strings.Contains(out, "not dispatched (stage connect: connection refused)") {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
	})

	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		fx := newSendFixture(t)
		// The fake applies the send, then closes without answering: the
		// message arrived, and the client cannot know it.
		if err := fx.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultDropAfterEffect}); err != nil {
			t.Fatal(err)
		}
		out, code, _ := runSendCapture(t, fx.srv.Token, "--api-root", fx.srv.URL, "--chat", strconv.FormatInt(fx.chat.ID, 10), "--text", "hi")
		if code != exitSendUnknown || !strings.Contains(out, "unknown: the request may have reached Telegram") {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
		if n := len(fx.srv.MessagesTo(fx.chat.ID)); n != 1 {
			t.Errorf("ledger has %d messages, want the 1 that arrived", n)
		}
	})

	t.Run("unknown proxy page", func(t *testing.T) {
		t.Parallel()
		fx := newSendFixture(t)
		if err := fx.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultProxyError}); err != nil {
			t.Fatal(err)
		}
		out, code, _ := runSendCapture(t, fx.srv.Token, "--api-root", fx.srv.URL, "--chat", strconv.FormatInt(fx.chat.ID, 10), "--text", "hi")
		if code != exitSendUnknown {
			t.Errorf("a proxy's 502 page: exit %d, want unknown; output:\n%s", code, out)
		}
	})
}

func TestSendUsage(t *testing.T) {
	t.Parallel()
	tok := "123456:" + strings.Repeat("A", 35)
	for _, args := range [][]string{
		{"--text", "hi"},
		{"--chat", "1"},
		{"--chat", "abc", "--text", "hi"},
		{"--chat", "1", "--text", strings.Repeat("x", maxSendText+1)},
		{"--chat", "1", "--text", "hi", "--token", "bad/token value"},
	} {
		var buf bytes.Buffer
		err := runSend(t.Context(), append([]string{"--token", tok, "--api-root", "http://127.0.0.1:9"}, args...), &buf, &buf)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%.60v: err = %v, want a usage error", args, err)
		}
		if strings.Contains(buf.String()+err.Error(), "bad/token") {
			t.Errorf("a malformed token was echoed: %v", err)
		}
	}
}
