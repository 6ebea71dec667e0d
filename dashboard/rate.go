package dashboard

import (
	"sync"
	"time"
)

// Bounds of a broadcast's measured rate.
const (
	// rateWindow is how far back the rate looks; minRateSpan is the
	// shortest span it is measured over.
	rateWindow  = time.Minute
	minRateSpan = 5 * time.Second
	// maxRateSamples bounds the samples kept per broadcast, and
	// maxRateNames the broadcasts followed.
	maxRateSamples = 64
	maxRateNames   = 2 * MaxBroadcasts
)

// progressSample is a running broadcast's finished count at one moment.
type progressSample struct {
	at   time.Time
	done int
}

// rateSampler measures each running broadcast's rate from what the pages
// read of its journal over the last rateWindow (the journal keeps no
// times). It is safe for concurrent use, and its memory is bounded.
type rateSampler struct {
	mu      sync.Mutex
	samples map[string][]progressSample
}

// progress is a broadcast's measured rate and the time left at it.
type progress struct {
	// Measuring: not enough time has been watched yet.
	Measuring bool
	PerSecond float64
	// ETA is the time left at PerSecond; zero when the rate is zero.
	ETA time.Duration
}

// observe records that name had done recipients finished at at, with
// pending left, and returns the rate over the samples of the last
// rateWindow.
func (s *rateSampler) observe(name string, at time.Time, done, pending int) progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == nil {
		s.samples = map[string][]progressSample{}
	}
	ss := s.samples[name]
	if _, ok := s.samples[name]; !ok && len(s.samples) >= maxRateNames {
		for k := range s.samples { // forget one other broadcast
			delete(s.samples, k)
			break
		}
	}
	if n := len(ss); n > 0 && (done < ss[n-1].done || at.Before(ss[n-1].at)) {
		ss = nil // another run from a fresh journal, or a clock step
	}
	ss = append(ss, progressSample{at: at, done: done})
	// Keep the newest sample at or before the window's start, so the span
	// covers the whole window, and drop older ones.
	cut := 0
	for i := range ss {
		if !ss[i].at.After(at.Add(-rateWindow)) {
			cut = i
		}
	}
	ss = ss[cut:]
	if len(ss) > maxRateSamples {
		ss = append(ss[:1], ss[len(ss)-maxRateSamples+1:]...)
	}
	s.samples[name] = ss
	first := ss[0]
	span := at.Sub(first.at)
	if span < minRateSpan {
		return progress{Measuring: true}
	}
	p := progress{PerSecond: float64(done-first.done) / span.Seconds()}
	if p.PerSecond > 0 {
		p.ETA = time.Duration(float64(pending) / p.PerSecond * float64(time.Second))
	}
	return p
}

// forget drops the samples of a broadcast that is not running.
func (s *rateSampler) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.samples, name)
}
