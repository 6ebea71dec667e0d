package dashboard_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
)

func sum(b []uint32) (n uint64) {
	for _, v := range b {
		n += uint64(v)
	}
	return n
}

// The ring keeps one bucket per BucketWidth over the Window and forgets
// what is older; totals keep counting.
func TestRecorderWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := dashboard.NewRecorder()
		rec.Add(dashboard.SeriesAccepted, 5)
		time.Sleep(dashboard.BucketWidth)
		rec.Add(dashboard.SeriesAccepted, 2)
		rec.Add(dashboard.SeriesAccepted, -3) // ignored
		rec.Add(dashboard.Series(99), 1)      // ignored
		s := rec.Snapshot()
		b := s.Buckets[dashboard.SeriesAccepted]
		if len(b) != int(dashboard.Window/dashboard.BucketWidth) {
			t.Fatalf("%d buckets", len(b))
		}
		if b[len(b)-1] != 2 || b[len(b)-2] != 5 || sum(b) != 7 {
			t.Errorf("last buckets %v, sum %d", b[len(b)-3:], sum(b))
		}
		time.Sleep(dashboard.Window - dashboard.BucketWidth)
		s = rec.Snapshot()
		if got := sum(s.Buckets[dashboard.SeriesAccepted]); got != 2 {
			t.Errorf("after the window passed the first bucket: %d in the window, want 2", got)
		}
		time.Sleep(3 * dashboard.Window)
		s = rec.Snapshot()
		if got := sum(s.Buckets[dashboard.SeriesAccepted]); got != 0 || s.Totals[dashboard.SeriesAccepted] != 7 {
			t.Errorf("long after: %d in the window, total %d; want 0 and 7", got, s.Totals[dashboard.SeriesAccepted])
		}
	})
}

// The observer counts what the runner reports, by series.
func TestRecorderObserver(t *testing.T) {
	t.Parallel()
	rec := dashboard.NewRecorder()
	o := rec.Observer()
	id := intake.Identity{UpdateID: 1, Attempt: 1, ClaimID: "c"}
	o.AcceptFunc(1, intake.Accepted)
	o.AcceptFunc(1, intake.Duplicate)
	o.ClaimFunc(id)
	o.SettleFunc(id, intake.StateCompleted)
	o.SettleFunc(id, intake.StateFailed)
	o.SettleFunc(id, intake.StateAbandoned)
	o.ExhaustFunc(intake.Exhaustion{Identity: id})
	o.LeaseLostFunc(id)
	s := rec.Snapshot()
	want := map[dashboard.Series]uint64{dashboard.SeriesAccepted: 1, dashboard.SeriesForwarded: 1, dashboard.SeriesCompleted: 1, dashboard.SeriesRetried: 1, dashboard.SeriesExhausted: 2}
	for k, n := range want {
		if s.Totals[k] != n {
			t.Errorf("%s: %d, want %d", k, s.Totals[k], n)
		}
	}
	if s.LeasesLost != 1 {
		t.Errorf("leases lost %d", s.LeasesLost)
	}
}

// Gateway outcomes are bounded to MaxGatewayOutcomes names.
func TestRecorderGateway(t *testing.T) {
	t.Parallel()
	rec := dashboard.NewRecorder()
	if rec.Snapshot().HasGateway {
		t.Fatal("a gateway section before any report")
	}
	for i := range 100 {
		rec.GatewaySend(fmt.Sprintf("outcome-%d", i))
	}
	rec.GatewaySend("")
	rec.GatewayPause(3 * time.Second)
	s := rec.Snapshot()
	if !s.HasGateway || len(s.Gateway) > dashboard.MaxGatewayOutcomes+1 || s.Pauses != 1 || s.PauseFor != 3*time.Second {
		t.Fatalf("gateway %d names, pauses %d", len(s.Gateway), s.Pauses)
	}
	var total uint64
	for _, c := range s.Gateway {
		total += c.N
	}
	if total != 101 {
		t.Errorf("counted %d sends, want 101", total)
	}
}

// The gateway's figures appear on the Overview once reported, and the
// webhook's status always.
func TestOverviewGatewayAndWebhook(t *testing.T) {
	t.Parallel()
	rec := dashboard.NewRecorder()
	s := serve(t, dashboard.Config{Store: storeKinds[0].open(t), Recorder: rec})
	_, page := s.get(t, "/")
	if strings.Contains(page, "429 pauses") {
		t.Error("gateway section without a gateway")
	}
	mustContain(t, "overview", page, "not checked yet")
	rec.GatewaySend("sent")
	rec.GatewaySend("replayed")
	rec.GatewayPause(2 * time.Second)
	rec.SetWebhook(hookowner.Status{Mode: hookowner.ModeWebhook, Owned: false, OwnerHost: "other.example", CheckedAt: time.Now(), LastError: errors.New("Wrong response from the webhook: 502").Error()})
	_, page = s.get(t, "/")
	mustContain(t, "overview", page, "429 pauses", "replayed", "moved away", "other.example", "Wrong response from the webhook: 502")
}
