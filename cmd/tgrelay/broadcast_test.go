package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/broadcast"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// bcWait bounds every wait for an asynchronous event in these tests.
const bcWait = 20 * time.Second

// bcFixture is a fake Telegram with n private chats, an audience file
// listing them, and an empty state root.
type bcFixture struct {
	srv      *telegramtest.Server
	chats    []telegramtest.Chat
	audience string
	stateDir string
}

func newBCFixture(t *testing.T, n int) *bcFixture {
	t.Helper()
	srv := telegramtest.NewUnstartedServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, Logf: t.Logf})
	srv.Start()
	t.Cleanup(srv.Close)
	f := &bcFixture{srv: srv, stateDir: filepath.Join(t.TempDir(), "state")}
	var lines []string
	lines = append(lines, "# the test audience", "")
	for i := range n {
		c, err := srv.NewPrivateChat(srv.NewUser(fmt.Sprintf("user%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.chats = append(f.chats, c)
		lines = append(lines, fmt.Sprintf("%d  # user%d", c.ID, i))
	}
	f.audience = filepath.Join(t.TempDir(), "audience.txt")
	if err := os.WriteFile(f.audience, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// args returns the flags common to every run against the fixture.
func (f *bcFixture) args(name string, extra ...string) []string {
	return append([]string{"run", "--name", name, "--state-dir", f.stateDir, "--audience", f.audience,
		"--api-root", f.srv.URL, "--token", f.srv.Token, "--rate", "1000", "--progress", "log"}, extra...)
}

// bcResult is what one in-process run of the command produced.
type bcResult struct {
	code           int
	stdout, stderr string
	err            error
}

// runBC runs `tgrelay broadcast args...` in-process and checks that the
// token appears in neither output.
func (f *bcFixture) runBC(t *testing.T, ctx context.Context, args ...string) bcResult {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runBroadcast(ctx, args, &out, &errOut)
	r := bcResult{code: bcExitCode(err, &errOut), stdout: out.String(), stderr: errOut.String(), err: err}
	if f != nil && (strings.Contains(r.stdout, f.srv.Token) || strings.Contains(r.stderr, f.srv.Token)) {
		t.Errorf("the token was printed:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	return r
}

// bcExitCode is the exit code run gives a command's error, with the
// command's own exit codes (exitCodeError). It prints the error to w as run
// does.
func bcExitCode(err error, w io.Writer) int {
	var ec *exitCodeError
	if errors.As(err, &ec) {
		fmt.Fprintf(w, "tgrelay broadcast: %v\n", err)
		return ec.ExitCode()
	}
	return report("broadcast", err, w)
}

// status runs `broadcast status --json` and returns the counts.
func (f *bcFixture) status(t *testing.T, name string) broadcastCounts {
	t.Helper()
	r := f.runBC(t, t.Context(), "status", "--name", name, "--state-dir", f.stateDir, "--json")
	if r.code != exitOK {
		t.Fatalf("status = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var c broadcastCounts
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil {
		t.Fatalf("status --json: %v: %q", err, r.stdout)
	}
	return c
}

// perChat counts the messages the fake accepted per chat.
func (f *bcFixture) perChat() map[int64]int {
	m := map[int64]int{}
	for _, msg := range f.srv.Messages() {
		m[msg.ChatID]++
	}
	return m
}

// requireEachOnce fails unless every chat of the fixture got exactly one
// message with text, and nobody else got any.
func (f *bcFixture) requireEachOnce(t *testing.T, text string) {
	t.Helper()
	got := f.perChat()
	for _, c := range f.chats {
		if got[c.ID] != 1 {
			t.Errorf("chat %d got %d messages, want 1", c.ID, got[c.ID])
		}
	}
	if len(got) != len(f.chats) {
		t.Errorf("%d chats got messages, want %d", len(got), len(f.chats))
	}
	for _, m := range f.srv.Messages() {
		if m.Text != text {
			t.Errorf("chat %d got %q, want %q", m.ChatID, m.Text, text)
		}
	}
}

func requireNoFiles(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		entries, _ := os.ReadDir(dir)
		t.Errorf("state dir %s exists (err %v, %d entries); want nothing written", dir, err, len(entries))
	}
}

func TestBroadcastRunSendsEachChatOnce(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 25)
	const text = "Hello <b>everyone</b> &amp; welcome"

	r := f.runBC(t, t.Context(), f.args("launch", "--text", text, "--html")...)
	if r.code != exitOK {
		t.Fatalf("run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f.requireEachOnce(t, text)
	for _, want := range []string{"broadcast launch: finished", "delivered    25", "pending      0", "total        25"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "broadcast launch: 25 recipients, 0 already done, 25 to send") {
		t.Errorf("stderr lacks the start line:\n%s", r.stderr)
	}
	want := broadcastCounts{Name: "launch", State: "finished", Total: 25, Delivered: 25}
	if got := f.status(t, "launch"); got != want {
		t.Errorf("status = %+v, want %+v", got, want)
	}

	// The same name again sends nothing new, and needs no audience file.
	calls := f.srv.Calls()["sendMessage"]
	args := f.args("launch", "--text", text, "--html")
	args = slicesDelete(args, "--audience", 1)
	r = f.runBC(t, t.Context(), args...)
	if r.code != exitOK || !strings.Contains(r.stdout, "delivered    25") {
		t.Fatalf("second run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := f.srv.Calls()["sendMessage"]; got != calls {
		t.Errorf("second run made %d sendMessage calls, want 0", got-calls)
	}
	f.requireEachOnce(t, text)
}

// slicesDelete returns args without the flag named flagName and its n
// values.
func slicesDelete(args []string, flagName string, n int) []string {
	for i, a := range args {
		if a == flagName {
			return append(append([]string{}, args[:i]...), args[i+1+n:]...)
		}
	}
	return args
}

func TestBroadcastTextFileAndDuplicates(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 3)
	// The audience lists a chat twice: it gets one message.
	b, _ := os.ReadFile(f.audience)
	b = append(b, []byte(fmt.Sprintf("\r\n  %d\t\r\n", f.chats[0].ID))...)
	if err := os.WriteFile(f.audience, b, 0o600); err != nil {
		t.Fatal(err)
	}
	textFile := filepath.Join(t.TempDir(), "msg.txt")
	if err := os.WriteFile(textFile, []byte("line one\nline two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := f.runBC(t, t.Context(), f.args("from-file", "--text-file", textFile)...)
	if r.code != exitOK {
		t.Fatalf("run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f.requireEachOnce(t, "line one\nline two")
}

func TestBroadcastCopyMessage(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 4)
	admin := f.srv.NewUser("admin")
	adminChat, err := f.srv.NewPrivateChat(admin)
	if err != nil {
		t.Fatal(err)
	}
	prepared, err := f.srv.SendText(adminChat, admin, "the prepared announcement")
	if err != nil {
		t.Fatal(err)
	}
	r := f.runBC(t, t.Context(), f.args("copy", "--copy-from", strconv.FormatInt(adminChat.ID, 10),
		"--message-id", strconv.FormatInt(prepared.MessageID, 10))...)
	if r.code != exitOK {
		t.Fatalf("run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f.requireEachOnce(t, "the prepared announcement")
	for _, m := range f.srv.Messages() {
		if m.Method != "copyMessage" {
			t.Errorf("chat %d: method %s, want copyMessage", m.ChatID, m.Method)
		}
	}
}

// TestBroadcastHaltUncertain: a send whose outcome is unknown (the fake
// applies it, then drops the connection) halts the broadcast with that
// recipient uncertain; the next run never resends it.
func TestBroadcastHaltUncertain(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 8)
	if err := f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultDropAfterEffect, Nth: 3}); err != nil {
		t.Fatal(err)
	}
	// One send at a time, so that the halt leaves a known number pending.
	r := f.runBC(t, t.Context(), f.args("halt", "--text", "news", "--concurrency", "1")...)
	if r.code != exitBroadcastHalted {
		t.Fatalf("run = %d, want %d (halted)\n%s%s", r.code, exitBroadcastHalted, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "uncertain") || !strings.Contains(r.stdout, "broadcast halt: halted") {
		t.Errorf("output does not explain the halt:\n%s%s", r.stdout, r.stderr)
	}
	want := broadcastCounts{Name: "halt", State: "incomplete", Total: 8, Delivered: 2, Uncertain: 1, Pending: 5}
	if got := f.status(t, "halt"); got != want {
		t.Errorf("status = %+v, want %+v", got, want)
	}
	// Human-readable status says the same.
	r = f.runBC(t, t.Context(), "status", "--name", "halt", "--state-dir", f.stateDir)
	for _, s := range []string{"broadcast halt: incomplete", "uncertain    1", "pending      5", "never resent"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("status lacks %q:\n%s", s, r.stdout)
		}
	}

	r = f.runBC(t, t.Context(), f.args("halt", "--text", "news")...)
	if r.code != exitOK {
		t.Fatalf("resumed run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The uncertain chat got it once (the fault applied it), and was not
	// sent to again; everyone else exactly once.
	f.requireEachOnce(t, "news")
	want = broadcastCounts{Name: "halt", State: "finished", Total: 8, Delivered: 7, Uncertain: 1}
	if got := f.status(t, "halt"); got != want {
		t.Errorf("status = %+v, want %+v", got, want)
	}
}

// TestBroadcastHaltPending: a Telegram wait above --max-retry-delay halts
// with the recipient pending, which the next run sends.
func TestBroadcastHaltPending(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 6)
	if err := f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 120, Nth: 4}); err != nil {
		t.Fatal(err)
	}
	r := f.runBC(t, t.Context(), f.args("wait", "--text", "news", "--concurrency", "1", "--max-retry-delay", "1s")...)
	if r.code != exitBroadcastHalted {
		t.Fatalf("run = %d, want %d (halted)\n%s%s", r.code, exitBroadcastHalted, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "pause-all") || !strings.Contains(r.stderr, "stays pending") {
		t.Errorf("stderr does not explain the halt:\n%s", r.stderr)
	}
	want := broadcastCounts{Name: "wait", State: "incomplete", Total: 6, Delivered: 3, Pending: 3}
	if got := f.status(t, "wait"); got != want {
		t.Errorf("status = %+v, want %+v", got, want)
	}
	// The audience file changed meanwhile: the snapshot wins, and the new
	// chat gets nothing.
	newcomer, err := f.srv.NewPrivateChat(f.srv.NewUser("newcomer"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.audience, []byte(strconv.FormatInt(newcomer.ID, 10)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = f.runBC(t, t.Context(), f.args("wait", "--text", "news")...)
	if r.code != exitOK {
		t.Fatalf("resumed run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "snapshot is used") {
		t.Errorf("stderr does not say the snapshot is used:\n%s", r.stderr)
	}
	f.requireEachOnce(t, "news") // also: the newcomer got nothing
}

// TestBroadcastWrongToken: a token Telegram refuses is found by getMe
// before anything is written or sent.
func TestBroadcastWrongToken(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 2)
	args := f.args("tok", "--text", "news")
	const other = "123456789:AAwrongwrongwrongwrongwrongwrongwrong"
	for i, a := range args {
		if a == "--token" {
			args[i+1] = other
		}
	}
	r := f.runBC(t, t.Context(), args...)
	if r.code != exitError || !strings.Contains(r.stderr, "getMe") {
		t.Fatalf("run = %d, want %d with getMe named\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, other) {
		t.Errorf("stderr prints the token: %s", r.stderr)
	}
	requireNoFiles(t, f.stateDir)
	if n := len(f.srv.Messages()); n != 0 {
		t.Errorf("%d messages sent", n)
	}
}

func TestBroadcastDryRun(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 5)
	r := f.runBC(t, t.Context(), f.args("dry", "--text", "news", "--dry-run")...)
	if r.code != exitOK {
		t.Fatalf("dry run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"dry run (nothing sent, nothing written)", "total        5", "pending      5"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	requireNoFiles(t, f.stateDir)
	if calls := f.srv.Calls(); len(calls) != 0 {
		t.Errorf("dry run called the Bot API: %v", calls)
	}

	// A dry run of a started broadcast shows its counts and changes nothing.
	if r := f.runBC(t, t.Context(), f.args("dry", "--text", "news")...); r.code != exitOK {
		t.Fatalf("run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	before := bcSnapshotDir(t, filepath.Join(f.stateDir, "dry"))
	calls := f.srv.Calls()["sendMessage"]
	r = f.runBC(t, t.Context(), f.args("dry", "--text", "news", "--dry-run")...)
	if r.code != exitOK || !strings.Contains(r.stdout, "delivered    5") {
		t.Fatalf("dry run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := bcSnapshotDir(t, filepath.Join(f.stateDir, "dry")); after != before {
		t.Errorf("dry run changed the state:\nbefore %s\nafter  %s", before, after)
	}
	if got := f.srv.Calls()["sendMessage"]; got != calls {
		t.Errorf("dry run sent %d messages", got-calls)
	}
}

// bcSnapshotDir describes the files of dir (names, sizes, contents).
func bcSnapshotDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%q ", e.Name(), data)
	}
	return b.String()
}

func TestBroadcastInvalidAudienceFile(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 2)
	content := fmt.Sprintf("%d\nnot-a-chat\n# fine\n\n0\n@ab\n%d # ok\n@valid_channel\n", f.chats[0].ID, f.chats[1].ID)
	if err := os.WriteFile(f.audience, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	r := f.runBC(t, t.Context(), f.args("bad", "--text", "news")...)
	if r.code != exitUsage {
		t.Fatalf("run = %d, want %d\n%s%s", r.code, exitUsage, r.stdout, r.stderr)
	}
	for _, s := range []string{"3 invalid line(s)", "line 2: \"not-a-chat\"", "line 5: chat id 0", "line 6: \"@ab\" is not a Telegram @username: want 5 to 32 letters", "Nothing was sent or written"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "broadcast: invalid recipient") {
		t.Errorf("stderr has the package's error text:\n%s", r.stderr)
	}
	for _, s := range []string{"line 1:", "line 3:", "line 7:", "line 8:"} {
		if strings.Contains(r.stderr, s) {
			t.Errorf("stderr blames a valid line (%q):\n%s", s, r.stderr)
		}
	}
	requireNoFiles(t, f.stateDir)
	if calls := f.srv.Calls(); len(calls) != 0 {
		t.Errorf("an invalid audience called the Bot API: %v", calls)
	}
}

// TestBroadcastStoppedByContext: cancelling the context (SIGINT) stops the
// run after the send in flight is recorded; a second runner of the same name
// meanwhile is refused; the next run finishes the rest.
func TestBroadcastStoppedByContext(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 10)
	// Every send takes 300 ms, so the run lasts about 3 s unless stopped.
	if err := f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Delay: 300 * time.Millisecond, Times: -1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan bcResult, 1)
	go func() { done <- f.runBC(t, ctx, f.args("stop", "--text", "news", "--concurrency", "1")...) }()
	testkit.WaitFor(t, "a first message", func() bool { return len(f.srv.Messages()) > 0 })

	// Another runner of the same name is refused while this one runs.
	r := f.runBC(t, t.Context(), f.args("stop", "--text", "news")...)
	if r.code != exitError || !strings.Contains(r.stderr, "already running") {
		t.Errorf("second runner = %d, want %d \"already running\"\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}

	cancel()
	var res bcResult
	select {
	case res = <-done:
	case <-time.After(bcWait):
		t.Fatal("run did not return after cancel")
	}
	if res.code != exitBroadcastStopped || !strings.Contains(res.stderr, "resume") {
		t.Fatalf("run = %d, want %d (stopped)\n%s%s", res.code, exitBroadcastStopped, res.stdout, res.stderr)
	}
	got := f.status(t, "stop")
	sent := len(f.srv.Messages())
	if got.Delivered != sent || got.Pending != 10-sent || got.Uncertain != 0 || sent == 10 {
		t.Errorf("status = %+v after %d messages; want every send recorded and some pending", got, sent)
	}

	f.srv.Disarm()
	if r := f.runBC(t, t.Context(), f.args("stop", "--text", "news")...); r.code != exitOK {
		t.Fatalf("resumed run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f.requireEachOnce(t, "news")
}

func TestBroadcastProgressBar(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 12)
	args := slicesDelete(f.args("bar", "--text", "news"), "--progress", 1)
	r := f.runBC(t, t.Context(), append(args, "--progress", "bar")...)
	if r.code != exitOK {
		t.Fatalf("run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The last drawing of the bar shows all 12 sent, with a rate.
	for _, s := range []string{"12/12", "msg/s", "100%"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("progress bar lacks %q:\n%s", s, r.stderr)
		}
	}
}

func TestBroadcastProgressLine(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	p := newBroadcastProgress(progressLog, &out, "news", 25, func() time.Time { return now })
	// Resumed with 10 done; 20 more in 10 s is 2/s, and 70 pending take 35 s.
	p.report(broadcast.Report{Name: "news", State: broadcast.StateRunning, Total: 100, Delivered: 10, Pending: 90})
	now = now.Add(10 * time.Second)
	p.report(broadcast.Report{Name: "news", State: broadcast.StateRunning, Total: 100, Delivered: 27, Unreachable: 2, Failed: 1, Pending: 70})
	p.report(broadcast.Report{Name: "news", State: broadcast.StateFinished, Total: 100, Delivered: 97, Unreachable: 2, Failed: 1})
	want := "broadcast news: 100 recipients, 10 already done, 90 to send at 25/s\n" +
		"broadcast news: 30/100 (30.0%): 27 delivered, 2 unreachable, 1 failed, 0 uncertain, 70 pending; 2.0 msg/s, ETA 35s\n"
	if out.String() != want {
		t.Errorf("progress =\n%s\nwant\n%s", out.String(), want)
	}
}

func TestBroadcastUsageErrors(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 1)
	long := strings.Repeat("a", 4097)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "missing subcommand"},
		{"unknown subcommand", []string{"launch"}, `unknown subcommand "launch"`},
		{"no name", []string{"run", "--text", "x"}, "--name is required"},
		{"bad name", f.args("../up", "--text", "x"), "--name"},
		{"no message", f.args("n"), "exactly one of"},
		{"two messages", f.args("n", "--text", "x", "--copy-from", "1", "--message-id", "2"), "exactly one of"},
		{"copy without id", f.args("n", "--copy-from", "1"), "--message-id"},
		{"copy from a name", f.args("n", "--copy-from", "@chan", "--message-id", "2"), "is not a chat id"},
		{"html copy", f.args("n", "--copy-from", "1", "--message-id", "2", "--html"), "--html"},
		{"bad html", f.args("n", "--text", "<b>bold", "--html"), "Telegram would refuse this HTML"},
		{"unknown tag", f.args("n", "--text", "<blink>x</blink>", "--html"), "Telegram would refuse this HTML"},
		{"too long", f.args("n", "--text", long), "4097 UTF-16 units"},
		{"html too long", f.args("n", "--text", "<b>"+long+"</b>", "--html"), "4097 UTF-16 units"},
		{"text file missing", f.args("n", "--text-file", "/nonexistent/msg.txt"), "--text-file"},
		{"rate zero", f.args("n", "--text", "x", "--rate", "0"), "--rate"},
		{"rate too high", f.args("n", "--text", "x", "--rate", "1e9"), "--rate"},
		{"concurrency", f.args("n", "--text", "x", "--concurrency", "0"), "--concurrency"},
		{"attempts", f.args("n", "--text", "x", "--max-attempts", "101"), "--max-attempts"},
		{"retry delay", f.args("n", "--text", "x", "--max-retry-delay", "0s"), "--max-retry-delay"},
		{"send timeout", f.args("n", "--text", "x", "--send-timeout", "11m"), "--send-timeout"},
		{"progress mode", f.args("n", "--text", "x", "--progress", "fancy"), "--progress"},
		{"progress every", f.args("n", "--text", "x", "--progress-every", "0s"), "--progress-every"},
		{"no audience", slicesDelete(f.args("n", "--text", "x"), "--audience", 1), "--audience is required"},
		{"audience missing", f.args("n", "--text", "x", "--audience", "/nonexistent/aud"), "audience file"},
		{"bad token", slicesDelete(f.args("n", "--text", "x"), "--token", 1), "no bot token"},
		{"status no name", []string{"status"}, "--name is required"},
		{"status stray", []string{"status", "--name", "n", "extra"}, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.name == "bad token" && os.Getenv(envToken) != "" {
				t.Skip("TGRELAY_TOKEN is set in the environment")
			}
			r := f.runBC(t, t.Context(), tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("code %d, want %d with %q\nstderr: %s", r.code, exitUsage, tc.want, r.stderr)
			}
		})
	}
	// Nothing of the above wrote state or called Telegram.
	t.Cleanup(func() {
		requireNoFiles(t, f.stateDir)
		if calls := f.srv.Calls(); len(calls) != 0 {
			t.Errorf("usage errors called the Bot API: %v", calls)
		}
	})
}

// TestBroadcastTokenFromEnv cannot be parallel: it sets TGRELAY_TOKEN.
func TestBroadcastTokenFromEnv(t *testing.T) {
	f := newBCFixture(t, 2)
	t.Setenv(envToken, f.srv.Token)
	args := slicesDelete(f.args("env", "--text", "news"), "--token", 1)
	if r := f.runBC(t, t.Context(), args...); r.code != exitOK {
		t.Fatalf("run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f.requireEachOnce(t, "news")
}

func TestBroadcastStatusUnknown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := (*bcFixture)(nil).runBC(t, t.Context(), "status", "--name", "nope", "--state-dir", dir)
	if r.code != exitError || !strings.Contains(r.stderr, "no broadcast nope") {
		t.Errorf("status = %d %s", r.code, r.stderr)
	}
}

func TestBroadcastHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"run", "-h"}, {"status", "-h"}} {
		r := (*bcFixture)(nil).runBC(t, t.Context(), args...)
		if r.code != exitOK {
			t.Errorf("%v = %d", args, r.code)
		}
		for _, s := range []string{"Usage: tgrelay broadcast run", "Exit codes", "Flags of run:", "-copy-from", "Flags of status:", "-json"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("%v: help lacks %q", args, s)
			}
		}
	}
}

func TestParseAudience(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		in    string
		want  []broadcast.Recipient
		lines []int // invalid lines
	}{
		{"ids and names", "1\n-1001234\n@news_channel\n", []broadcast.Recipient{broadcast.ChatID(1), broadcast.ChatID(-1001234), broadcast.Username("@news_channel")}, nil},
		{"comments blanks crlf bom", "\xef\xbb\xbf# header\r\n\r\n  42 # alice\r\n\t7\t\n", []broadcast.Recipient{broadcast.ChatID(42), broadcast.ChatID(7)}, nil},
		{"no final newline", "5", []broadcast.Recipient{broadcast.ChatID(5)}, nil},
		{"duplicates kept", "5\n5\n", []broadcast.Recipient{broadcast.ChatID(5), broadcast.ChatID(5)}, nil},
		{"invalid lines", "1\nx\n2\n0\n@1bad\n99999999999999999999\n1 2\n", nil, []int{2, 4, 5, 6, 7}},
		{"long line", "1\n" + strings.Repeat(" ", maxAudienceLineBytes+1) + "\n", nil, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseAudience([]byte(tc.in))
			if tc.lines == nil {
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
				return
			}
			var ae *audienceError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *audienceError", err)
			}
			var lines []int
			for _, p := range ae.Problems {
				lines = append(lines, p.Line)
			}
			if fmt.Sprint(lines) != fmt.Sprint(tc.lines) {
				t.Errorf("invalid lines %v, want %v (%v)", lines, tc.lines, err)
			}
		})
	}
}

func TestParseAudienceLimits(t *testing.T) {
	t.Parallel()
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		if _, err := parseAudience([]byte("# nobody\n\n")); err == nil || !strings.Contains(err.Error(), "no recipients") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("problems listed up to the bound", func(t *testing.T) {
		t.Parallel()
		_, err := parseAudience([]byte(strings.Repeat("x\n", maxAudienceProblems+5)))
		var ae *audienceError
		if !errors.As(err, &ae) || len(ae.Problems) != maxAudienceProblems || ae.More != 5 {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(err.Error(), "and 5 more") || !strings.Contains(err.Error(), fmt.Sprintf("has %d invalid", maxAudienceProblems+5)) {
			t.Errorf("message: %v", err)
		}
	})
	t.Run("too many recipients", func(t *testing.T) {
		t.Parallel()
		b := bytes.Repeat([]byte("1\n"), broadcast.MaxRecipients+1)
		if _, err := parseAudience(b); err == nil || !strings.Contains(err.Error(), "more than") {
			t.Errorf("err = %v", err)
		}
		if _, err := parseAudience(b[:2*broadcast.MaxRecipients]); err != nil {
			t.Errorf("exactly MaxRecipients: %v", err)
		}
	})
	t.Run("file too large", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "big")
		fh, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := fh.Truncate(maxAudienceFileBytes + 1); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		if _, err := readAudienceFile(path); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("err = %v", err)
		}
	})
}

func FuzzParseAudience(f *testing.F) {
	for _, s := range []string{"1\n2\n", "# c\n\n@news_channel\n", "x\n0\n", "\xef\xbb\xbf-100123 # g\r\n", "@", "#", "\n\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := parseAudience(b)
		if err != nil {
			var ae *audienceError
			if !errors.As(err, &ae) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			lines := bytes.Count(b, []byte("\n")) + 1
			for _, p := range ae.Problems {
				if p.Line < 1 || p.Line > lines {
					t.Fatalf("line %d of %d", p.Line, lines)
				}
			}
			return
		}
		if len(rs) == 0 {
			t.Fatal("no recipients and no error")
		}
		for _, r := range rs {
			if err := r.Validate(); err != nil {
				t.Fatalf("invalid recipient %v accepted: %v", r, err)
			}
		}
	})
}

// TestBroadcastAgainstSandbox runs `tgrelay sandbox` in-process on a free
// port, creates chats through its control API, and broadcasts to them
// through its URL and token, as an operator would.
func TestBroadcastAgainstSandbox(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &bcLines{}
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"sandbox", "-addr", "127.0.0.1:0", "-no-limits"}, out, io.Discard) }()
	defer func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(bcWait):
			t.Error("sandbox did not stop")
		}
	}()
	var base, token string
	testkit.WaitFor(t, "the sandbox's URL and token", func() bool {
		base, token = out.field("Bot API:"), out.field("Token:")
		return base != "" && token != ""
	})

	c := &http.Client{Timeout: bcWait}
	defer c.CloseIdleConnections()
	var ids []string
	for i := range 6 {
		var user, chat struct {
			ID int64 `json:"id"`
		}
		bcPost(t, c, base+"/_sandbox/users", map[string]any{"first_name": fmt.Sprintf("u%d", i)}, &user)
		bcPost(t, c, base+"/_sandbox/chats", map[string]any{"type": "private", "user_id": user.ID}, &chat)
		ids = append(ids, strconv.FormatInt(chat.ID, 10))
	}
	audience := filepath.Join(t.TempDir(), "audience.txt")
	if err := os.WriteFile(audience, []byte(strings.Join(ids, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := runBroadcast(t.Context(), []string{"run", "--name", "sandboxed", "--state-dir", stateDir, "--audience", audience,
		"--text", "hi from <i>tgrelay</i>", "--html", "--api-root", base, "--token", token, "--rate", "500", "--progress", "log"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("broadcast: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), token) {
		t.Error("the token was printed")
	}

	var msgs []struct {
		ChatID int64  `json:"chat_id"`
		Text   string `json:"text"`
	}
	getJSON(t, c, base+"/_sandbox/messages", &msgs)
	per := map[string]int{}
	for _, m := range msgs {
		per[strconv.FormatInt(m.ChatID, 10)]++
		if m.Text != "hi from <i>tgrelay</i>" {
			t.Errorf("chat %d got %q", m.ChatID, m.Text)
		}
	}
	for _, id := range ids {
		if per[id] != 1 {
			t.Errorf("chat %s got %d messages, want 1", id, per[id])
		}
	}
	var repeats []any
	getJSON(t, c, base+"/_sandbox/repeats", &repeats)
	if len(repeats) != 0 {
		t.Errorf("repeats: %v", repeats)
	}
}

// bcLines collects the lines written to it; safe for concurrent use.
type bcLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *bcLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// field returns the rest of the first complete line starting with prefix,
// trimmed, or "".
func (l *bcLines) field(prefix string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// bcPost posts body to the sandbox's control API and decodes its 200 answer
// into out.
func bcPost(t *testing.T, c *http.Client, url string, body, out any) {
	t.Helper()
	if code := postJSON(t, c, url, body, out); code != http.StatusOK {
		t.Fatalf("POST %s: status %d", url, code)
	}
}

func TestBroadcastProgressMode(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		flag string
		w    io.Writer
		want broadcastProgressMode
	}{
		{"auto", w, progressLog}, // a pipe is not a terminal
		{"auto", &bytes.Buffer{}, progressLog},
		{"bar", &bytes.Buffer{}, progressBar},
		{"log", w, progressLog},
		{"none", w, progressNone},
	} {
		if got, err := progressMode(tc.flag, tc.w); err != nil || got != tc.want {
			t.Errorf("progressMode(%q, %T) = %v, %v; want %v", tc.flag, tc.w, got, err, tc.want)
		}
	}
	if _, err := progressMode("Bar", w); err == nil {
		t.Error("progressMode accepted \"Bar\"")
	}
}

// TestBroadcastStatusList: status says whether a runner holds the broadcast
// and, with --list, names the uncertain (and other) recipients; --json
// carries the same lists.
func TestBroadcastStatusList(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 5)
	if err := f.srv.SetBlocked(telegramtest.User{ID: f.chats[0].ID}, true); err != nil {
		t.Fatal(err)
	}
	// Calls 1..3 go to chats 0..2 (0 refused); the connection to chat 2
	// drops after Telegram applied the send.
	if err := f.srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultDropAfterEffect, Nth: 3}); err != nil {
		t.Fatal(err)
	}
	r := f.runBC(t, t.Context(), f.args("list", "--text", "news", "--concurrency", "1")...)
	if r.code != exitBroadcastHalted {
		t.Fatalf("run = %d, want %d (halted)\n%s%s", r.code, exitBroadcastHalted, r.stdout, r.stderr)
	}
	before := bcTree(t, f.stateDir)

	r = f.runBC(t, t.Context(), "status", "--name", "list", "--state-dir", f.stateDir, "--list", "uncertain")
	if r.code != exitOK {
		t.Fatalf("status = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := fmt.Sprintf("uncertain recipients (1):\n  %d\n", f.chats[2].ID)
	for _, s := range []string{"running: no\n", "broadcast list: incomplete", "uncertain    1", "unreachable  1", want} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("status --list uncertain lacks %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "unreachable recipients") || strings.Contains(r.stdout, fmt.Sprint(f.chats[0].ID)) {
		t.Errorf("--list uncertain printed other lists:\n%s", r.stdout)
	}

	r = f.runBC(t, t.Context(), "status", "--name", "list", "--state-dir", f.stateDir, "--list", "all")
	for _, s := range []string{want, fmt.Sprintf("unreachable recipients (1):\n  %d\n", f.chats[0].ID), "failed recipients (0):\n", "migrated recipients (0):\n"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("status --list all lacks %q:\n%s", s, r.stdout)
		}
	}

	r = f.runBC(t, t.Context(), "status", "--name", "list", "--state-dir", f.stateDir, "--list", "all", "--json")
	var got struct {
		Running     *bool   `json:"running"`
		Uncertain   []int64 `json:"uncertain_recipients"`
		Failed      []int64 `json:"failed_recipients"`
		Unreachable []int64 `json:"unreachable_recipients"`
		Migrated    []any   `json:"migrated_recipients"`
		Pending     int     `json:"pending"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("status --json: %v: %q", err, r.stdout)
	}
	if got.Running == nil || *got.Running || len(got.Uncertain) != 1 || got.Uncertain[0] != f.chats[2].ID ||
		len(got.Unreachable) != 1 || got.Unreachable[0] != f.chats[0].ID ||
		got.Failed == nil || len(got.Failed) != 0 || got.Migrated == nil || got.Pending != 2 {
		t.Errorf("status --json --list all = %s", r.stdout)
	}
	// Without --list, --json carries no lists.
	r = f.runBC(t, t.Context(), "status", "--name", "list", "--state-dir", f.stateDir, "--json")
	if !strings.Contains(r.stdout, `"running":false`) || strings.Contains(r.stdout, "_recipients") {
		t.Errorf("status --json = %s", r.stdout)
	}

	r = f.runBC(t, t.Context(), "status", "--name", "list", "--state-dir", f.stateDir, "--list", "pending")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--list") {
		t.Errorf("status --list pending = %d %s", r.code, r.stderr)
	}
	if after := bcTree(t, f.stateDir); after != before {
		t.Errorf("status changed the state dir:\nbefore %s\nafter  %s", before, after)
	}

	// A runner's lock (the same exclusive flock on the same file) makes it
	// "running: yes", and status leaves the lock held.
	lf, err := os.OpenFile(filepath.Join(f.stateDir, "list", "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	r = f.runBC(t, t.Context(), "status", "--name", "list", "--state-dir", f.stateDir)
	if r.code != exitOK || !strings.Contains(r.stdout, "running: yes\n") {
		t.Errorf("status while locked = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = f.runBC(t, t.Context(), f.args("list", "--text", "news")...)
	if r.code != exitError || !strings.Contains(r.stderr, "already running") {
		t.Errorf("run while locked = %d, want %d (already running)\n%s", r.code, exitError, r.stderr)
	}
}

// bcTree describes every file under dir (path, size, mode, mtime).
func bcTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d %s\n", p, info.Mode(), info.Size(), info.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
