package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// runCrashBroadcast: a broadcast to -recipients chats of telegramtest,
// `tgrelay broadcast run` killed with SIGKILL at random moments at least
// -kills times and resumed by name until it finishes. Afterwards no chat
// has the message twice unless the journal records it uncertain.
func runCrashBroadcast(ctx context.Context, args []string, out io.Writer) error {
	f := newCrashFlags("crash-broadcast", "recipients", 2000, 100, 10, 4*time.Minute, out)
	ctx, dir, done, err := f.setup(ctx, args, out)
	if err != nil {
		return err
	}
	defer done()
	n := f.n
	res, err := crashBroadcastRun(ctx, *f.bin, dir, *n, *f.rate, *f.kills, out)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kills\truns\trecipients\treached once\ttwice\ttwice, not uncertain\tnever\tstatus: delivered\tuncertain\tpending\t")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", res.kills, res.runs, *n, res.once, res.twice, res.twiceNotUncertain, res.never,
		res.status.Delivered, res.status.Uncertain, res.status.Pending)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "status lists %d uncertain: %d reached once, %d never, %d twice\n", res.status.Uncertain, res.uncertainOnce, res.uncertainNever, res.twice-res.twiceNotUncertain)
	fmt.Fprintf(out, "RESULT crash-broadcast recipients=%d kills=%d runs=%d once=%d twice=%d twice_not_uncertain=%d never=%d uncertain=%d pending=%d safe=%t\n",
		*n, res.kills, res.runs, res.once, res.twice, res.twiceNotUncertain, res.never, res.status.Uncertain, res.status.Pending, res.twiceNotUncertain == 0)
	if res.twiceNotUncertain != 0 {
		return fmt.Errorf("%d chats got the message twice without the journal saying uncertain", res.twiceNotUncertain)
	}
	return nil
}

type crashBroadcastResult struct {
	kills, runs                   int
	once, twice, never            int
	twiceNotUncertain             int
	uncertainOnce, uncertainNever int
	status                        struct {
		Delivered, Uncertain, Pending int
		UncertainRecipients           []int64 `json:"uncertain_recipients"`
	}
}

// crashBroadcastRun is the scenario proper, shared with its short test.
func crashBroadcastRun(ctx context.Context, bin, dir string, n int, rate float64, minKills int, out io.Writer) (crashBroadcastResult, error) {
	var res crashBroadcastResult
	tg := telegramtest.NewUnstartedServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, Logf: func(string, ...any) {}})
	tg.Start()
	defer tg.Close()
	// Sends take 20-80 ms, so kills land while some are in flight.
	if err := tg.Arm(telegramtest.Fault{Method: "sendMessage", Times: -1, Delay: 20 * time.Millisecond, Jitter: 60 * time.Millisecond}); err != nil {
		return res, err
	}
	var audience strings.Builder
	chats := make([]int64, n)
	for i := range n {
		c, err := tg.NewPrivateChat(tg.NewUser("user" + strconv.Itoa(i)))
		if err != nil {
			return res, err
		}
		chats[i] = c.ID
		fmt.Fprintln(&audience, c.ID)
	}
	audiencePath := filepath.Join(dir, "audience.txt")
	if err := os.WriteFile(audiencePath, []byte(audience.String()), 0o600); err != nil {
		return res, err
	}
	state := filepath.Join(dir, "state")
	env := childEnv("TGRELAY_TOKEN=" + tg.Token)
	runArgs := []string{"broadcast", "run", "--name", "crash", "--state-dir", state, "--audience", audiencePath,
		"--text", "crash drill", "--api-root", tg.URL, "--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--concurrency", "16", "--progress", "none"}
	logPath := filepath.Join(dir, "broadcast.log")

	fmt.Fprintf(out, "crash-broadcast: %d recipients at %.0f/s, SIGKILL 0.5-1.5 s into a run (at least %d), resumed by name until finished\n", n, rate, minKills)
	for ctx.Err() == nil {
		logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return res, err
		}
		cmd := exec.Command(bin, runArgs...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
		err = cmd.Start()
		logf.Close()
		if err != nil {
			return res, err
		}
		res.runs++
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var killAt <-chan time.Time
		if res.kills < minKills {
			killAt = time.After(500*time.Millisecond + time.Duration(rand.Int64N(int64(time.Second))))
		}
		select {
		case <-killAt:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			res.kills++
			continue
		case err = <-done:
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
			return res, ctx.Err()
		}
		var ee *exec.ExitError
		switch {
		case err == nil: // finished
		case errors.As(err, &ee) && ee.ExitCode() == 3: // halted: run again
			continue
		default:
			return res, fmt.Errorf("broadcast run: %v\n%s", err, tail(logPath))
		}
		break
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	st := exec.CommandContext(ctx, bin, "broadcast", "status", "--name", "crash", "--state-dir", state, "--list", "uncertain", "--json")
	st.Env = env
	b, err := st.Output()
	if err != nil {
		return res, fmt.Errorf("broadcast status: %w", err)
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&res.status); err != nil {
		return res, fmt.Errorf("broadcast status: %w: %s", err, b)
	}
	uncertain := map[int64]bool{}
	for _, id := range res.status.UncertainRecipients {
		uncertain[id] = true
	}
	got := map[int64]int{}
	for _, m := range tg.Messages() {
		got[m.ChatID]++
	}
	for _, id := range chats {
		switch c := got[id]; {
		case c == 0:
			res.never++
			if uncertain[id] {
				res.uncertainNever++
			}
		case c == 1:
			res.once++
			if uncertain[id] {
				res.uncertainOnce++
			}
		default:
			res.twice++
			if !uncertain[id] {
				res.twiceNotUncertain++
			}
		}
	}
	return res, nil
}
