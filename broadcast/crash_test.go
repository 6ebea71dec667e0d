package broadcast

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// Environment of the crash child (see TestCrashChild).
const (
	envCrashChild = "TGRELAY_BROADCAST_CRASH_CHILD"
	envCrashURL   = "TGRELAY_BROADCAST_CRASH_URL"
	envCrashToken = "TGRELAY_BROADCAST_CRASH_TOKEN"
	envCrashDir   = "TGRELAY_BROADCAST_CRASH_DIR"
)

// TestCrashResume runs a broadcast to 2,000 chats in a child process, kills
// it with SIGKILL at random moments ten times, resumes it to the end, and
// checks the fake's ledger: no chat received the message twice, and every
// chat not recorded uncertain received it exactly once.
func TestCrashResume(t *testing.T) {
	t.Parallel()
	const chats, kills = 2000, 10
	srv, _, ids := fakeTelegram(t, telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}}, chats)
	dir := t.TempDir()
	audience, err := json.Marshal(ids)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "audience-source.json"), audience, 0o600))

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envCrashChild+"=1", envCrashURL+"="+srv.URL,
			envCrashToken+"="+srv.Token, envCrashDir+"="+dir)
		return cmd
	}
	killed, progressed := 0, 0
	lastLines := 0
	for range kills {
		cmd := child()
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		must(t, cmd.Start())
		// Kill at a random moment after the child has started sending.
		started := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "crash child: running") {
					close(started)
					break
				}
			}
			io.Copy(io.Discard, stdout)
		}()
		select {
		case <-started:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("child never started sending:\n%s", stderr.String())
		}
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond) // the random crash moment
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err == nil {
			continue // it finished before the kill
		}
		killed++
		b, _ := os.ReadFile(filepath.Join(dir, "crash", journalFile))
		if n := strings.Count(string(b), "\n"); n > lastLines {
			progressed++
			lastLines = n
		}
	}
	if killed == 0 || progressed == 0 {
		t.Fatalf("killed %d runs, %d of them mid-broadcast: the test proved nothing", killed, progressed)
	}
	cmd := child()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("final child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "crash child: finished") {
		t.Fatalf("final child did not finish:\n%s", out)
	}
	t.Logf("killed %d of %d runs (%d after journal progress)", killed, kills, progressed)

	res, err := replayFile(filepath.Join(dir, "crash", journalFile), chats)
	must(t, err)
	got := map[int64]int{}
	for _, m := range srv.Messages() {
		got[m.ChatID]++
	}
	uncertain := 0
	for i, id := range ids {
		switch st := res.states[i]; {
		case got[id] > 1:
			t.Errorf("chat %d received the message %d times", id, got[id])
		case st == stateUncertain:
			uncertain++
		case st != stateDelivered:
			t.Errorf("chat %d ended in state %d", id, st)
		case got[id] != 1:
			t.Errorf("chat %d delivered per the journal, received %d", id, got[id])
		}
	}
	t.Logf("uncertain %d of %d", uncertain, chats)
}

// TestCrashChild is the child process of TestCrashResume; it does nothing
// unless started by it.
func TestCrashChild(t *testing.T) {
	if os.Getenv(envCrashChild) != "1" {
		t.Skip("runs only as the child of TestCrashResume")
	}
	dir := os.Getenv(envCrashDir)
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	c, err := botapi.New(os.Getenv(envCrashToken), botapi.Config{APIRoot: os.Getenv(envCrashURL),
		HTTPClient: &http.Client{Transport: tr, Timeout: 10 * time.Second}})
	must(t, err)
	send, err := Sender(c, Message{Text: "crash test"})
	must(t, err)
	rep, err := Run(context.Background(), Config{
		Name: "crash", Dir: dir, Rate: 1000, Concurrency: 8, SendFunc: send,
		ProgressFunc: func(r Report) {
			if r.State == StateRunning {
				fmt.Printf("crash child: running %d delivered\n", r.Delivered)
			}
		},
		AudienceFunc: func(context.Context) ([]Recipient, error) {
			b, err := os.ReadFile(filepath.Join(dir, "audience-source.json"))
			if err != nil {
				return nil, err
			}
			var xs []int64
			if err := json.Unmarshal(b, &xs); err != nil {
				return nil, err
			}
			return ids(xs...), nil
		},
	})
	must(t, err)
	fmt.Printf("crash child: %s %+v\n", rep.State, *rep)
}
