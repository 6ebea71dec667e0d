package dashboard

import (
	"sort"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
)

// Series names one counted flow of the relay, charted on the Overview.
type Series int

// The series the Overview charts.
const (
	// SeriesAccepted counts updates newly recorded (Accept's Accepted).
	SeriesAccepted Series = iota
	// SeriesForwarded counts attempts started (a claim taken).
	SeriesForwarded
	// SeriesCompleted counts attempts settled completed.
	SeriesCompleted
	// SeriesRetried counts attempts settled failed with a retry due.
	SeriesRetried
	// SeriesExhausted counts updates whose handling ended for good: an
	// exhaustion recorded, or an abandonment.
	SeriesExhausted
	// SeriesExpired counts updates with a deadline that ended expired:
	// their deadline passed before the app answered (see
	// [intake.Deadlines]). An expiry is no exhaustion.
	SeriesExpired

	numSeries
)

// String returns the series' name as the Overview labels it.
func (s Series) String() string {
	switch s {
	case SeriesAccepted:
		return "accepted"
	case SeriesForwarded:
		return "forwarded"
	case SeriesCompleted:
		return "completed"
	case SeriesRetried:
		return "retried"
	case SeriesExhausted:
		return "exhausted"
	case SeriesExpired:
		return "expired"
	}
	return "unknown"
}

// Bounds of a [Recorder].
const (
	// BucketWidth is the time one chart point covers.
	BucketWidth = 10 * time.Second
	// Window is the span the charts cover; the ring keeps Window/BucketWidth
	// buckets and nothing older.
	Window = time.Hour
	// MaxGatewayOutcomes bounds the distinct outcome names
	// [Recorder.GatewaySend] keeps; further names are counted as "other".
	MaxGatewayOutcomes = 16

	numBuckets = int(Window / BucketWidth)
)

// AppStatus is the app's side as the relay reports it with
// [Recorder.SetApp]: whether the app refuses forwards with 401 or 403 (a
// configuration alert), and the updates held for it.
type AppStatus struct {
	// AuthFailing reports that the app's last answer to a forward was 401
	// or 403; AuthCode is that status.
	AuthFailing bool
	AuthCode    int
	// Since is when the app began refusing; zero while not AuthFailing.
	Since time.Time
	// Held is how many updates are held for it now.
	Held int
	// Refusals counts the 401 and 403 answers since the relay started.
	Refusals int64
}

// Recorder is the bounded in-process ring the Overview's charts read: per
// [Series], one count per [BucketWidth] over the last [Window], plus the
// counters and the webhook and gateway figures the relay reports. Nothing
// older than Window is kept, so its memory is fixed.
//
// A Recorder is fed by the relay — through [Recorder.Observer] for the
// intake runner's events, [Recorder.SetWebhook] after every ownership
// check, [Recorder.GatewaySend] and [Recorder.GatewayPause] from the
// gateway, and [Recorder.SetApp] when the app's answers change the alert
// — and read by the [Handler]. Every method is safe for concurrent
// use and fast enough to call from an observer. The zero value is not
// usable; call [NewRecorder].
type Recorder struct {
	mu      sync.Mutex
	started time.Time
	// ring[i%numBuckets] holds absolute bucket i; head is the newest
	// absolute bucket written or rotated to.
	ring       [numBuckets][numSeries]uint32
	head       int64
	totals     [numSeries]uint64
	leasesLost uint64

	gateway    map[string]uint64
	gatewaySet bool
	pauses     uint64
	lastPause  time.Time
	pauseFor   time.Duration

	webhook    hookowner.Status
	webhookSet bool

	app AppStatus
}

// NewRecorder returns an empty Recorder whose window starts now.
func NewRecorder() *Recorder {
	now := time.Now()
	return &Recorder{started: now, head: bucketOf(now), gateway: map[string]uint64{}}
}

// bucketOf is the absolute bucket index of t.
func bucketOf(t time.Time) int64 { return t.UnixNano() / int64(BucketWidth) }

// advanceLocked rotates the ring forward to the bucket of now, zeroing the
// buckets it passes. A clock that stepped back writes into the newest
// bucket.
func (r *Recorder) advanceLocked(now time.Time) {
	b := bucketOf(now)
	if b <= r.head {
		return
	}
	if b-r.head >= int64(numBuckets) {
		r.ring = [numBuckets][numSeries]uint32{}
	} else {
		for i := r.head + 1; i <= b; i++ {
			r.ring[i%int64(numBuckets)] = [numSeries]uint32{}
		}
	}
	r.head = b
}

// Add counts n events of series s now. An unknown series or n <= 0 is
// ignored.
func (r *Recorder) Add(s Series, n int) {
	if s < 0 || s >= numSeries || n <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advanceLocked(time.Now())
	c := &r.ring[r.head%int64(numBuckets)][s]
	if uint64(*c)+uint64(n) > 1<<32-1 {
		*c = 1<<32 - 1
	} else {
		*c += uint32(n)
	}
	r.totals[s] += uint64(n)
}

// LeaseLost counts one attempt that lost its ownership.
func (r *Recorder) LeaseLost() {
	r.mu.Lock()
	r.leasesLost++
	r.mu.Unlock()
}

// Observer returns an [intake.Observer] that feeds r: accepted updates,
// attempts started, settlements (completed, failed with a retry due,
// abandoned), exhaustions and lost leases. Combine it with the relay's
// other observers; every func is fast and safe for concurrent use.
func (r *Recorder) Observer() intake.Observer {
	return intake.Observer{
		AcceptFunc: func(_ int64, a intake.Acceptance) {
			if a == intake.Accepted {
				r.Add(SeriesAccepted, 1)
			}
		},
		ClaimFunc: func(intake.Identity) { r.Add(SeriesForwarded, 1) },
		SettleFunc: func(_ intake.Identity, s intake.State) {
			switch s {
			case intake.StateCompleted:
				r.Add(SeriesCompleted, 1)
			case intake.StateFailed:
				r.Add(SeriesRetried, 1)
			case intake.StateAbandoned:
				r.Add(SeriesExhausted, 1)
			}
		},
		ExhaustFunc:   func(intake.Exhaustion) { r.Add(SeriesExhausted, 1) },
		ExpireFunc:    func(intake.Expiry) { r.Add(SeriesExpired, 1) },
		LeaseLostFunc: func(intake.Identity) { r.LeaseLost() },
	}
}

// SetWebhook records the relay's webhook status: the outcome of its latest
// claim or check, or, with a Mode other than [hookowner.ModeWebhook], that
// there is no webhook to check.
func (r *Recorder) SetWebhook(w hookowner.Status) {
	r.mu.Lock()
	r.webhook, r.webhookSet = w, true
	r.mu.Unlock()
}

// SetApp records the app's side as the relay sees it now. The Overview
// shows it once the app refused a forward.
func (r *Recorder) SetApp(a AppStatus) {
	r.mu.Lock()
	r.app = a
	r.mu.Unlock()
}

// GatewaySend counts one send the gateway finished, by its outcome (for
// example "sent", "replayed", "not-dispatched", "unknown", "refused",
// "rate-limited"). At most [MaxGatewayOutcomes] distinct names are kept;
// the rest count as "other". Once called, the Overview shows the gateway's
// section.
func (r *Recorder) GatewaySend(outcome string) {
	if outcome == "" {
		outcome = "other"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gatewaySet = true
	if _, ok := r.gateway[outcome]; !ok && len(r.gateway) >= MaxGatewayOutcomes {
		outcome = "other"
	}
	r.gateway[outcome]++
}

// GatewayPause counts one pause of the gateway's sends after a Telegram
// 429, of duration d.
func (r *Recorder) GatewayPause(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gatewaySet = true
	r.pauses++
	r.lastPause, r.pauseFor = time.Now(), d
}

// Snapshot is a copy of a [Recorder]'s figures at one moment.
type Snapshot struct {
	// Taken is when the snapshot was taken; Started when the recorder was.
	Taken, Started time.Time
	// Buckets holds, per series, the counts of the last [Window], one per
	// [BucketWidth], oldest first; the last one is the bucket in progress.
	Buckets [numSeries][]uint32
	// Totals counts every event since the recorder started, per series.
	Totals [numSeries]uint64
	// LeasesLost counts attempts that lost their ownership.
	LeasesLost uint64
	// Webhook is the last webhook status; HasWebhook is false before the
	// first [Recorder.SetWebhook].
	Webhook    hookowner.Status
	HasWebhook bool
	// Gateway counts the gateway's sends by outcome, sorted by name;
	// HasGateway is false until the gateway reported anything.
	Gateway    []Count
	HasGateway bool
	// Pauses counts the gateway's 429 pauses; LastPause and PauseFor
	// describe the latest.
	Pauses    uint64
	LastPause time.Time
	PauseFor  time.Duration
	// App is the app's side as last reported by [Recorder.SetApp].
	App AppStatus
}

// Count is one named counter of a [Snapshot].
type Count struct {
	Name string
	N    uint64
}

// Snapshot copies r's figures now.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.advanceLocked(now)
	s := Snapshot{
		Taken: now, Started: r.started, Totals: r.totals, LeasesLost: r.leasesLost,
		Webhook: r.webhook, HasWebhook: r.webhookSet,
		HasGateway: r.gatewaySet, Pauses: r.pauses, LastPause: r.lastPause, PauseFor: r.pauseFor,
		App: r.app,
	}
	for k := range numSeries {
		b := make([]uint32, numBuckets)
		for i := range numBuckets {
			abs := r.head - int64(numBuckets-1) + int64(i)
			if abs < 0 {
				continue
			}
			b[i] = r.ring[abs%int64(numBuckets)][k]
		}
		s.Buckets[k] = b
	}
	for name, n := range r.gateway {
		s.Gateway = append(s.Gateway, Count{Name: name, N: n})
	}
	sort.Slice(s.Gateway, func(i, j int) bool { return s.Gateway[i].Name < s.Gateway[j].Name })
	return s
}
