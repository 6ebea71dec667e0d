package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/tgrelay/tgrelay/broadcast"
)

// broadcastProgressMode is how `broadcast run` shows its progress.
type broadcastProgressMode int

const (
	progressNone broadcastProgressMode = iota
	progressLog                        // a line every --progress-every
	progressBar                        // a bar with the rate and the ETA
)

// progressMode turns --progress into a mode; "auto" is a bar when w is a
// terminal, log lines otherwise.
func progressMode(s string, w io.Writer) (broadcastProgressMode, error) {
	switch s {
	case "bar":
		return progressBar, nil
	case "log":
		return progressLog, nil
	case "none":
		return progressNone, nil
	case "auto":
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return progressBar, nil
		}
		return progressLog, nil
	}
	return progressNone, fmt.Errorf("--progress %q is not one of auto, bar, log, none", s)
}

// broadcastProgress receives the broadcast's reports (Config.ProgressFunc,
// whose calls never overlap) and shows them on w. The rate and the ETA count
// only the recipients settled by this run, so a resumed broadcast does not
// look faster than it is.
type broadcastProgress struct {
	mode    broadcastProgressMode
	w       io.Writer
	name    string
	rate    float64 // configured, for the start line
	nowFunc func() time.Time

	started   bool
	start     time.Time
	doneStart int // recipients with an outcome when this run started
	bar       *progressbar.ProgressBar
	lastDraw  time.Time // of the bar
}

func newBroadcastProgress(mode broadcastProgressMode, w io.Writer, name string, rate float64, now func() time.Time) *broadcastProgress {
	return &broadcastProgress{mode: mode, w: w, name: name, rate: rate, nowFunc: now}
}

// report is the Config.ProgressFunc.
func (p *broadcastProgress) report(rep broadcast.Report) {
	if p.mode == progressNone {
		return
	}
	done := rep.Total - rep.Pending
	if !p.started {
		p.started, p.start, p.doneStart = true, p.nowFunc(), done
		fmt.Fprintf(p.w, "broadcast %s: %d recipients, %d already done, %d to send at %v/s\n",
			p.name, rep.Total, done, rep.Pending, p.rate)
		if p.mode == progressBar {
			p.bar = progressbar.NewOptions64(int64(rep.Pending),
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(p.name),
				progressbar.OptionShowCount(),
				progressbar.OptionShowIts(),
				progressbar.OptionSetItsString("msg"),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionSetElapsedTime(true),
				progressbar.OptionSetWidth(30),
			)
			p.lastDraw = p.start
		}
		if rep.State == broadcast.StateRunning {
			return
		}
	}
	final := rep.State != broadcast.StateRunning
	switch p.mode {
	case progressBar:
		// The bar is drawn at most every broadcastBarThrottle, and always at
		// the end (the bar's own throttle would skip the last state). A
		// write error on stderr is not worth failing the broadcast.
		if now := p.nowFunc(); final || now.Sub(p.lastDraw) >= broadcastBarThrottle {
			p.lastDraw = now
			_ = p.bar.Set64(int64(done - p.doneStart))
		}
		if final {
			_ = p.bar.Exit()
			fmt.Fprintln(p.w)
		}
	case progressLog:
		if !final { // the final counts go to stdout
			fmt.Fprintln(p.w, p.line(rep))
		}
	}
}

// line is one progress line of log mode.
func (p *broadcastProgress) line(rep broadcast.Report) string {
	done := rep.Total - rep.Pending
	elapsed := p.nowFunc().Sub(p.start)
	pct := 100.0
	if rep.Total > 0 {
		pct = 100 * float64(done) / float64(rep.Total)
	}
	s := fmt.Sprintf("broadcast %s: %d/%d (%.1f%%): %d delivered, %d unreachable, %d failed, %d uncertain, %d pending",
		p.name, done, rep.Total, pct, rep.Delivered, rep.Unreachable, rep.Failed, rep.Uncertain, rep.Pending)
	sent := done - p.doneStart
	if sent <= 0 || elapsed <= 0 {
		return s + "; rate -, ETA -"
	}
	perSec := float64(sent) / elapsed.Seconds()
	eta := time.Duration(float64(rep.Pending) / perSec * float64(time.Second)).Round(time.Second)
	return s + fmt.Sprintf("; %.1f msg/s, ETA %v", perSec, eta)
}
