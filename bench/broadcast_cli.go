package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// broadcastCLIGoal is the share of --rate a run must reach, as
// broadcast-rate's goal.
const broadcastCLIGoal = 0.97

// runBroadcastCLI runs `tgrelay broadcast run` as a process, as an
// operator does, sending to every recipient of an audience at -rate with
// Telegram's limits off, and reports the rate reached against the one
// asked for. With -cpus the process runs on those CPUs only, as on a
// machine with that many; with -bin-b a second build runs alternately, so
// two builds compare in one run.
func runBroadcastCLI(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("broadcast-cli", flag.ContinueOnError)
	fs.SetOutput(out)
	n := fs.Int("recipients", 3000, "recipients per run")
	rate := fs.Float64("rate", 1000, "broadcast run --rate")
	rounds := fs.Int("rounds", 3, "rounds; each runs every build once, alternating")
	bin := fs.String("bin", "", "tgrelay binary (default: go build github.com/tgrelay/tgrelay/cmd/tgrelay)")
	binB := fs.String("bin-b", "", "a second tgrelay binary, run alternately with the first")
	cpus := fs.String("cpus", "", "run every broadcast on these CPUs only (a `list` as taskset takes it, such as 1), as on a machine with that many CPUs, whose default GOMAXPROCS follows")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *rounds < 1 || *rate <= 0 {
		return errors.New("-recipients, -rounds and -rate must be positive")
	}
	dir, remove, err := buildsInTempDir(ctx, "broadcast-cli", *cpus, bin, binB, out)
	defer remove()
	if err != nil {
		return err
	}
	tg := telegramtest.NewUnstartedServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, Logf: func(string, ...any) {}})
	tg.Start()
	defer tg.Close()
	var audience strings.Builder
	for i := range *n {
		c, err := tg.NewPrivateChat(tg.NewUser("user" + strconv.Itoa(i)))
		if err != nil {
			return err
		}
		fmt.Fprintln(&audience, c.ID)
	}
	audiencePath := filepath.Join(dir, "audience.txt")
	if err := os.WriteFile(audiencePath, []byte(audience.String()), 0o600); err != nil {
		return err
	}

	builds := []struct{ name, bin string }{{"tgrelay", *bin}}
	if *binB != "" {
		builds = append(builds, struct{ name, bin string }{"tgrelay-b", *binB})
	}
	on := "every CPU"
	if *cpus != "" {
		on = "CPUs " + *cpus
	}
	fmt.Fprintf(out, "broadcast-cli: tgrelay broadcast run to %d recipients at --rate %g --concurrency 16, Telegram's limits off, on %s\n", *n, *rate, on)
	reached := make([][]float64, len(builds))
	for r := 1; r <= *rounds; r++ {
		for i, b := range builds {
			state := filepath.Join(dir, fmt.Sprintf("state-%d-%d", r, i))
			cmd := exec.CommandContext(ctx, b.bin, "broadcast", "run", "--name", "bench", "--state-dir", state,
				"--audience", audiencePath, "--text", "bench", "--api-root", tg.URL,
				"--rate", strconv.FormatFloat(*rate, 'f', -1, 64), "--concurrency", "16", "--progress", "none")
			cmd.Env = childEnv("TGRELAY_TOKEN=" + tg.Token)
			before := tg.Calls()["sendMessage"]
			start := time.Now()
			if msg, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %w\n%s", b.name, err, msg)
			}
			got := float64(*n) / time.Since(start).Seconds()
			if sent := tg.Calls()["sendMessage"] - before; sent != *n {
				return fmt.Errorf("%s: Telegram got %d sendMessage calls for %d recipients", b.name, sent, *n)
			}
			reached[i] = append(reached[i], got)
			fmt.Fprintf(out, "round %d  %-10s %6.0f sends/s  (%.2f of --rate)\n", r, b.name, got, got / *rate)
		}
	}
	fmt.Fprintf(out, "\n%10s %18s %12s %6s\n", "build", "median sends/s", "of --rate", "goal")
	result := fmt.Sprintf("RESULT broadcast-cli recipients=%d rate=%g rounds=%d cpus=%q", *n, *rate, *rounds, *cpus)
	for i, b := range builds {
		m := median(reached[i])
		met := m / *rate >= broadcastCLIGoal
		fmt.Fprintf(out, "%10s %18.0f %12.2f %6v\n", b.name, m, m / *rate, met)
		key := strings.ReplaceAll(b.name, "-", "_")
		result += fmt.Sprintf(" %s_sends_per_s=%.0f %s_share=%.3f %s_goal=%v", key, m, key, m / *rate, key, met)
	}
	if len(builds) == 2 {
		var ratios []float64
		wins := 0
		for r := range reached[0] {
			ratios = append(ratios, reached[1][r]/reached[0][r])
			if reached[1][r] > reached[0][r] {
				wins++
			}
		}
		fmt.Fprintf(out, "tgrelay-b against tgrelay: faster in %d of %d rounds, median of per-round ratios %.3fx\n", wins, len(ratios), median(ratios))
		result += fmt.Sprintf(" b_round_wins=%d b_paired_ratio=%.3f", wins, median(ratios))
	}
	fmt.Fprintln(out, result)
	return nil
}
