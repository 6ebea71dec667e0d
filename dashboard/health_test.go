package dashboard

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
)

// snapshotWith is a recorder snapshot whose last buckets hold completed,
// retried and exhausted attempts.
func snapshotWith(completed, retried, exhausted uint32) Snapshot {
	var s Snapshot
	for k := range s.Buckets {
		s.Buckets[k] = make([]uint32, numBuckets)
	}
	last := numBuckets - 1
	s.Buckets[SeriesCompleted][last] = completed
	s.Buckets[SeriesRetried][last] = retried
	s.Buckets[SeriesExhausted][last] = exhausted
	// Attempts before the failure window do not count.
	s.Buckets[SeriesRetried][0] = 1000
	return s
}

func TestJudge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ok := intake.Stats{Count: map[intake.State]int{}}
	owned := hookowner.Status{Mode: "webhook", Owned: true, OwnerHost: "relay.example"}
	withWebhook := func(s Snapshot, w hookowner.Status) Snapshot { s.Webhook, s.HasWebhook = w, true; return s }
	for _, tc := range []struct {
		name    string
		in      healthInput
		verdict string
		reason  string // a part of the reason
	}{
		{"healthy", healthInput{StatsOK: true, Stats: ok, HasRecorder: true, Snapshot: withWebhook(snapshotWith(50, 1, 0), owned)},
			"Healthy", "Every check passes"},
		{"store down", healthInput{StatsOK: false, HasRecorder: true, Snapshot: snapshotWith(50, 0, 0)},
			"Unhealthy", "The store did not answer"},
		{"store unhealthy", healthInput{StatsOK: true, Stats: ok, HasHealth: true, HealthErr: errors.New("gone")},
			"Unhealthy", "answered 503"},
		{"app down", healthInput{StatsOK: true, Stats: ok, HasRecorder: true, Snapshot: snapshotWith(0, 3, 0)},
			"Unhealthy", "the app looks down or unreachable"},
		{"app refuses", healthInput{StatsOK: true, Stats: ok, HasRecorder: true, Snapshot: func() Snapshot {
			s := snapshotWith(0, 0, 0)
			s.App = AppStatus{AuthFailing: true, AuthCode: 401, Since: now.Add(-time.Minute), Held: 4}
			return s
		}()}, "Unhealthy", "refuses forwards with 401"},
		{"failure rate high", healthInput{StatsOK: true, Stats: ok, HasRecorder: true, Snapshot: snapshotWith(8, 10, 2)},
			"Unhealthy", "60% of the 20 attempts"},
		{"failure rate raised", healthInput{StatsOK: true, Stats: ok, HasRecorder: true, Snapshot: snapshotWith(80, 20, 0)},
			"Degraded", "20% of the 100 attempts"},
		{"oldest pending late", healthInput{StatsOK: true, Stats: intake.Stats{OldestPending: now.Add(-2 * time.Minute)}},
			"Degraded", "waited 2m0s"},
		{"oldest pending stuck", healthInput{StatsOK: true, Stats: intake.Stats{OldestPending: now.Add(-time.Hour)}},
			"Unhealthy", "waited 1h0m0s"},
		{"exhaustions wait", healthInput{StatsOK: true, Stats: intake.Stats{Unacknowledged: 2}},
			"Degraded", "2 exhaustions wait"},
		{"webhook moved", healthInput{StatsOK: true, Stats: ok, HasRecorder: true,
			Snapshot: withWebhook(snapshotWith(5, 0, 0), hookowner.Status{Mode: "webhook", OwnerHost: "other.example"})},
			"Unhealthy", "points elsewhere (other.example)"},
		{"webhook delivery error", healthInput{StatsOK: true, Stats: ok, HasRecorder: true,
			Snapshot: withWebhook(snapshotWith(5, 0, 0), hookowner.Status{Mode: "webhook", Owned: true, LastError: "Connection timed out"})},
			"Degraded", "Connection timed out"},
		{"heartbeats lapsed", healthInput{StatsOK: true, Stats: ok, Heartbeats: true, Procs: []intake.Process{{ID: "a", Until: now.Add(-time.Second)}}},
			"Unhealthy", "no process is handling updates"},
		{"no heartbeats registered", healthInput{StatsOK: true, Stats: ok, Heartbeats: true},
			"Healthy", "Every check passes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			h := judge(tc.in)
			if h.Verdict != tc.verdict || !strings.Contains(h.Reason, tc.reason) {
				t.Errorf("verdict %s: %q, want %s containing %q", h.Verdict, h.Reason, tc.verdict, tc.reason)
			}
		})
	}
}

func TestRateSampler(t *testing.T) {
	t.Parallel()
	var s rateSampler
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	if p := s.observe("promo", t0, 0, 100); !p.Measuring {
		t.Errorf("first sample: %+v, want measuring", p)
	}
	if p := s.observe("promo", t0.Add(2*time.Second), 10, 90); !p.Measuring {
		t.Errorf("2 s watched: %+v, want measuring", p)
	}
	p := s.observe("promo", t0.Add(10*time.Second), 50, 50)
	if p.Measuring || p.PerSecond != 5 || p.ETA != 10*time.Second {
		t.Errorf("10 s watched, 50 done: %+v, want 5/s and 10s left", p)
	}
	// The rate looks back one window only: 60 s later, 30 more done in
	// the last minute.
	s.observe("promo", t0.Add(40*time.Second), 50, 50)
	p = s.observe("promo", t0.Add(100*time.Second), 80, 20)
	if want := 30.0 / 60; p.PerSecond != want {
		t.Errorf("rate over the last window: %v, want %v", p.PerSecond, want)
	}
	// A stalled broadcast has no ETA.
	s.observe("stalled", t0, 5, 5)
	if p := s.observe("stalled", t0.Add(time.Minute), 5, 5); p.PerSecond != 0 || p.ETA != 0 || p.Measuring {
		t.Errorf("stalled: %+v", p)
	}
	// A fresh journal under the same name starts again.
	if p := s.observe("promo", t0.Add(101*time.Second), 0, 100); !p.Measuring {
		t.Errorf("after a restart from zero: %+v, want measuring", p)
	}
	// Memory stays bounded.
	for i := range maxRateSamples * 3 {
		s.observe("busy", t0.Add(time.Duration(i)*time.Millisecond), i, 1)
	}
	for i := range maxRateNames + 10 {
		s.observe(string(rune('a'+i%26))+strings.Repeat("x", i), t0, 0, 1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) > maxRateNames {
		t.Errorf("%d broadcasts followed, bound %d", len(s.samples), maxRateNames)
	}
	for name, ss := range s.samples {
		if len(ss) > maxRateSamples {
			t.Errorf("%s: %d samples, bound %d", name, len(ss), maxRateSamples)
		}
	}
}
