package dashboard

import (
	"fmt"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Thresholds of the Overview's health verdict.
const (
	// OldestPendingWarn and OldestPendingBad are how long the oldest
	// pending update may wait before the verdict degrades, then fails.
	OldestPendingWarn = time.Minute
	OldestPendingBad  = 10 * time.Minute
	// FailureWindow is the span of the failure rate: the Recorder's last
	// five minutes. FailureWarn and FailureBad are the shares of failed
	// attempts that degrade, then fail the verdict, once at least
	// FailureMinAttempts attempts ended in the window.
	FailureWindow      = 5 * time.Minute
	FailureWarn        = 0.10
	FailureBad         = 0.50
	FailureMinAttempts = 10
)

// The levels of a health check, worst last.
const (
	levelOK   = "ok"
	levelNone = "none" // nothing to judge (not configured, not reported yet)
	levelWarn = "warn"
	levelBad  = "bad"
)

func levelRank(l string) int {
	switch l {
	case levelWarn:
		return 2
	case levelBad:
		return 3
	}
	return 0
}

// healthCheck is one line of the verdict.
type healthCheck struct {
	Name  string
	Level string
	Text  string
}

// health is the Overview's verdict: the worst of its checks, with the
// reason in words.
type health struct {
	Level   string // ok, warn or bad
	Verdict string // Healthy, Degraded or Unhealthy
	Reason  string
	Checks  []healthCheck
}

// healthInput is what the verdict is judged from.
type healthInput struct {
	Now time.Time
	// Stats are the store's figures; StatsOK is false when the store did
	// not answer.
	Stats   intake.Stats
	StatsOK bool
	// HasHealth: the store reports its health; HealthErr is its answer.
	HasHealth bool
	HealthErr error
	// Snapshot is the Recorder's, when HasRecorder.
	HasRecorder bool
	Snapshot    Snapshot
	// Procs lists the registered processes, when Heartbeats.
	Heartbeats bool
	Procs      []intake.Process
}

// judge decides the verdict.
func judge(in healthInput) health {
	var cs []healthCheck
	add := func(name, level, format string, args ...any) {
		cs = append(cs, healthCheck{Name: name, Level: level, Text: fmt.Sprintf(format, args...)})
	}

	switch {
	case !in.StatsOK:
		add("Store", levelBad, "The store did not answer; the relay's log has the details.")
	case in.HasHealth && in.HealthErr != nil:
		add("Store", levelBad, "The store cannot record updates now, so Telegram's deliveries are answered 503 and retried by Telegram; the relay's log has the details.")
	default:
		add("Store", levelOK, "The store answers.")
	}

	window := fmt.Sprintf("%d minutes", int(FailureWindow.Minutes()))
	if in.HasRecorder {
		app := in.Snapshot.App
		failed, completed := recentOutcomes(in.Snapshot)
		switch {
		case app.AuthFailing:
			add("App", levelBad, "The app refuses forwards with %d since %s: a configuration problem (the app's secret check and serve --app-secret-token disagree); %d updates are held.",
				app.AuthCode, roundDur(in.Now.Sub(app.Since)), app.Held)
		case completed == 0 && failed >= 3:
			add("App", levelBad, "No forward succeeded in the last %s and %d attempts failed: the app looks down or unreachable.", window, failed)
		case completed == 0 && failed == 0:
			add("App", levelNone, "No forward ended in the last %s.", window)
		default:
			add("App", levelOK, "The app completed %d forwards in the last %s.", completed, window)
		}
		if total := failed + completed; total >= FailureMinAttempts {
			rate := float64(failed) / float64(total)
			level := levelOK
			switch {
			case rate >= FailureBad:
				level = levelBad
			case rate >= FailureWarn:
				level = levelWarn
			}
			add("Failure rate", level, "%.0f%% of the %d attempts that ended in the last %s failed.", rate*100, total, window)
		} else {
			add("Failure rate", levelNone, "Too few attempts in the last %s to judge (%d).", window, total)
		}
	} else {
		add("App", levelNone, "Not reported: this dashboard has no recorder.")
	}

	if in.StatsOK {
		if op := in.Stats.OldestPending; op.IsZero() {
			add("Oldest pending", levelOK, "Nothing waits.")
		} else {
			age := in.Now.Sub(op)
			level := levelOK
			switch {
			case age >= OldestPendingBad:
				level = levelBad
			case age >= OldestPendingWarn:
				level = levelWarn
			}
			add("Oldest pending", level, "The oldest pending update has waited %v.", roundDur(age))
		}
		if n := in.Stats.Unacknowledged; n > 0 {
			add("Exhaustions", levelWarn, "%d %s for an operator.", n, plural(n, "exhaustion waits", "exhaustions wait"))
		}
	}

	if in.HasRecorder && in.Snapshot.HasWebhook {
		wh := in.Snapshot.Webhook
		switch {
		case wh.Mode == "polling":
			add("Webhook", levelOK, "Long polling: no webhook.")
		case wh.Mode == "unmanaged":
			add("Webhook", levelNone, "Not managed: the relay has no public URL and leaves the webhook as it is.")
		case !wh.Owned:
			add("Webhook", levelBad, "The webhook points elsewhere (%s): Telegram sends updates to another relay or app.", orNone(wh.OwnerHost))
		case wh.LastError != "":
			add("Webhook", levelWarn, "Owned, but Telegram reports a delivery error: %s", wh.LastError)
		default:
			add("Webhook", levelOK, "Owned by this relay.")
		}
	}

	if in.Heartbeats {
		live := 0
		for _, p := range in.Procs {
			if !p.Until.Before(in.Now) {
				live++
			}
		}
		switch {
		case len(in.Procs) == 0:
			add("Heartbeat", levelNone, "No process is registered (heartbeats off, or no serve process runs).")
		case live == 0:
			add("Heartbeat", levelBad, "Every registered process's heartbeat lapsed: no process is handling updates.")
		case live < len(in.Procs):
			add("Heartbeat", levelWarn, "%d of %d processes have a lapsed heartbeat; their updates are taken over.", len(in.Procs)-live, len(in.Procs))
		default:
			add("Heartbeat", levelOK, "%d %s with a live heartbeat.", live, plural(live, "process", "processes"))
		}
	}

	h := health{Level: levelOK, Checks: cs}
	for _, c := range cs {
		if levelRank(c.Level) > levelRank(h.Level) {
			h.Level = c.Level
		}
	}
	var reasons []string
	for _, c := range cs {
		if c.Level == h.Level && h.Level != levelOK {
			reasons = append(reasons, c.Text)
		}
	}
	switch h.Level {
	case levelBad:
		h.Verdict = "Unhealthy"
	case levelWarn:
		h.Verdict = "Degraded"
	default:
		h.Verdict = "Healthy"
		reasons = []string{"Every check passes."}
	}
	h.Reason = strings.Join(reasons, " ")
	return h
}

// recentOutcomes counts the failed (retried or exhausted) and completed
// attempts over the last FailureWindow of s.
func recentOutcomes(s Snapshot) (failed, completed uint64) {
	n := int(FailureWindow / BucketWidth)
	sum := func(b []uint32) uint64 {
		var t uint64
		for _, v := range b[max(len(b)-n, 0):] {
			t += uint64(v)
		}
		return t
	}
	if len(s.Buckets[SeriesCompleted]) == 0 {
		return 0, 0
	}
	return sum(s.Buckets[SeriesRetried]) + sum(s.Buckets[SeriesExhausted]), sum(s.Buckets[SeriesCompleted])
}

func orNone(s string) string {
	if s == "" {
		return "no URL"
	}
	return s
}
