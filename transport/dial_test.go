package transport_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/transport"
)

// fakeNet is a deterministic network for the connection race, run inside a
// synctest bubble: every address behaves as its mode says, and each dial is
// recorded with its (virtual) time since start.
type fakeNet struct {
	start time.Time
	mode  map[string]string // ip -> "hole" (never answers), "fail" (refused at once), "ok"
	v4    []string
	v6    []string
	delay map[string]time.Duration // "ip4"/"ip6" -> answer delay; absent = at once

	mu    sync.Mutex
	dials []dialRecord
}

type dialRecord struct {
	ip string
	at time.Duration
}

func (f *fakeNet) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if d, ok := f.delay[network]; ok {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	list := f.v4
	if network == "ip6" {
		list = f.v6
	}
	var out []netip.Addr
	for _, s := range list {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

func (f *fakeNet) dial(ctx context.Context, network, address string) (net.Conn, error) {
	ap := netip.MustParseAddrPort(address)
	ip := ap.Addr().String()
	f.mu.Lock()
	f.dials = append(f.dials, dialRecord{ip, time.Since(f.start)})
	f.mu.Unlock()
	switch f.mode[ip] {
	case "ok":
		c1, c2 := net.Pipe()
		c2.Close()
		return c1, nil
	case "hole":
		<-ctx.Done()
		return nil, ctx.Err()
	default:
		return nil, errors.New("connection refused (simulated)")
	}
}

func (f *fakeNet) records() []dialRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.dials)
}

func (f *fakeNet) transport(t *testing.T, cfg transport.Config) *transport.Transport {
	t.Helper()
	cfg.LookupFunc = f.lookup
	cfg.DialFunc = f.dial
	tr, err := transport.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.start = time.Now()
	return tr
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestRaceStaircase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{mode: map[string]string{"10.0.0.1": "hole", "10.0.0.2": "hole", "10.0.0.3": "ok"},
			v4: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}}
		tr := f.transport(t, transport.Config{})
		c, err := tr.DialContext(t.Context(), "tcp", "telegram.test:443")
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		c.Close()
		want := []dialRecord{{"10.0.0.1", 0}, {"10.0.0.2", ms(250)}, {"10.0.0.3", ms(500)}}
		if got := f.records(); !slices.Equal(got, want) {
			t.Errorf("dials = %v, want %v (a new attempt every 250 ms, none cancelled)", got, want)
		}
	})
}

func TestRaceFailureStartsNextAttemptAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{mode: map[string]string{"10.0.0.1": "fail", "10.0.0.2": "ok"},
			v4: []string{"10.0.0.1", "10.0.0.2"}}
		tr := f.transport(t, transport.Config{AttemptDelay: transport.MaxAttemptDelay})
		c, err := tr.DialContext(t.Context(), "tcp", "telegram.test:443")
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		c.Close()
		want := []dialRecord{{"10.0.0.1", 0}, {"10.0.0.2", 0}}
		if got := f.records(); !slices.Equal(got, want) {
			t.Errorf("dials = %v, want %v", got, want)
		}
	})
}

// TestRaceInterleavesFamilies: families alternate, IPv6 first; tcp4 and
// tcp6 keep to their family.
func TestRaceInterleavesFamilies(t *testing.T) {
	for network, want := range map[string][]string{
		"tcp":  {"2001:db8::1", "192.0.2.1", "2001:db8::2", "192.0.2.2", "192.0.2.3"},
		"tcp4": {"192.0.2.1", "192.0.2.2", "192.0.2.3"},
		"tcp6": {"2001:db8::1", "2001:db8::2"},
	} {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeNet{mode: map[string]string{},
				v4: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"},
				v6: []string{"2001:db8::1", "2001:db8::2"},
				// A first, AAAA within the resolution delay: both lists are
				// known before the first attempt.
				delay: map[string]time.Duration{"ip6": ms(10)}}
			tr := f.transport(t, transport.Config{})
			_, err := tr.DialContext(t.Context(), network, "telegram.test:443")
			assertNotDispatched(t, err, transport.StageConnect)
			var got []string
			for _, r := range f.records() {
				got = append(got, r.ip)
				if first := f.records()[0].at; r.at != first {
					t.Errorf("%s: dial of %s at %v, want %v (each failure starts the next at once)", network, r.ip, r.at, first)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: dial order = %v, want %v", network, got, want)
			}
		})
	}
}

// TestRaceResolutionDelay: the first attempt waits up to ResolutionDelay
// (50 ms) after the A answer for AAAA, never for A after AAAA; an address
// arriving later starts at once when nothing is in flight, else joins the
// staircase.
func TestRaceResolutionDelay(t *testing.T) {
	cases := []struct {
		name  string
		v4    string // its mode
		delay map[string]time.Duration
		want  []dialRecord
	}{
		{"late AAAA within the delay is waited for", "ok", map[string]time.Duration{"ip6": ms(30)},
			[]dialRecord{{"2001:db8::1", ms(30)}}},
		{"AAAA before A starts the race at once", "ok", map[string]time.Duration{"ip4": ms(400)},
			[]dialRecord{{"2001:db8::1", 0}}},
		{"late AAAA with nothing in flight is tried at once", "fail", map[string]time.Duration{"ip6": ms(200)},
			[]dialRecord{{"192.0.2.1", ms(50)}, {"2001:db8::1", ms(200)}}},
		{"AAAA later than the delay joins the race", "hole", map[string]time.Duration{"ip6": ms(200)},
			[]dialRecord{{"192.0.2.1", ms(50)}, {"2001:db8::1", ms(300)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeNet{mode: map[string]string{"2001:db8::1": "ok", "192.0.2.1": tc.v4},
					v4: []string{"192.0.2.1"}, v6: []string{"2001:db8::1"}, delay: tc.delay}
				tr := f.transport(t, transport.Config{})
				c, err := tr.DialContext(t.Context(), "tcp", "telegram.test:443")
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				if got := f.records(); !slices.Equal(got, tc.want) {
					t.Errorf("dials = %v, want %v", got, tc.want)
				}
			})
		})
	}
}

func TestRaceBudgetCoversLookupAndConnect(t *testing.T) {
	// DialContext and RoundTrip apply the same budget.
	for name, connect := range map[string]func(context.Context, *transport.Transport) error{
		"DialContext": func(ctx context.Context, tr *transport.Transport) error {
			_, err := tr.DialContext(ctx, "tcp", "telegram.test:443")
			return err
		},
		"RoundTrip": func(ctx context.Context, tr *transport.Transport) error {
			_, err := send(ctx, tr, "https://telegram.test")
			return err
		},
	} {
		t.Run("connect/"+name, func(t *testing.T) {
			budgetCoversConnect(t, connect)
		})
	}
	t.Run("lookup never answers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeNet{delay: map[string]time.Duration{"ip4": time.Hour, "ip6": time.Hour}}
			tr := f.transport(t, transport.Config{ConnectTimeout: time.Second})
			_, err := tr.DialContext(t.Context(), "tcp", "telegram.test:443")
			assertNotDispatched(t, err, transport.StageLookup)
			if !errors.Is(err, transport.ErrConnectTimeout) {
				t.Errorf("err = %v, want ErrConnectTimeout", err)
			}
			if got := time.Since(f.start); got != time.Second {
				t.Errorf("gave up after %v, want the 1 s budget", got)
			}
		})
	})
}

func TestRaceLookupFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, err := transport.New(transport.Config{
			LookupFunc: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.DialContext(t.Context(), "tcp", "telegram.test:443")
		assertNotDispatched(t, err, transport.StageLookup)
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) {
			t.Errorf("err = %v, want the resolver's *net.DNSError inside", err)
		}
		f := &fakeNet{}
		tr = f.transport(t, transport.Config{})
		_, err = tr.DialContext(t.Context(), "tcp", "telegram.test:443")
		assertNotDispatched(t, err, transport.StageLookup)
		if !errors.Is(err, transport.ErrNoAddress) {
			t.Errorf("err = %v, want ErrNoAddress", err)
		}
		// An IP literal of the family the network excludes is no address
		// either, as for net.Dialer: it is never dialled.
		for network, address := range map[string]string{"tcp4": "[2001:db8::1]:443", "tcp6": "192.0.2.1:443"} {
			f := &fakeNet{mode: map[string]string{"2001:db8::1": "ok", "192.0.2.1": "ok"}}
			tr = f.transport(t, transport.Config{})
			_, err = tr.DialContext(t.Context(), network, address)
			assertNotDispatched(t, err, transport.StageLookup)
			if !errors.Is(err, transport.ErrNoAddress) || len(f.records()) != 0 {
				t.Errorf("%s to %s: err = %v after dials %v, want ErrNoAddress and no dial", network, address, err, f.records())
			}
		}
	})
}

// budgetCoversConnect: a lookup taking 400 ms and two addresses that never
// answer end the call after exactly the 1 s connect budget.
func budgetCoversConnect(t *testing.T, connect func(context.Context, *transport.Transport) error) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{mode: map[string]string{"192.0.2.1": "hole", "192.0.2.2": "hole"},
			v4: []string{"192.0.2.1", "192.0.2.2"}, delay: map[string]time.Duration{"ip4": ms(400), "ip6": ms(400)}}
		tr := f.transport(t, transport.Config{ConnectTimeout: time.Second, Proxy: noProxy})
		err := connect(t.Context(), tr)
		assertNotDispatched(t, err, transport.StageConnect)
		if !errors.Is(err, transport.ErrConnectTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want ErrConnectTimeout and DeadlineExceeded", err)
		}
		if got := time.Since(f.start); got != time.Second {
			t.Errorf("gave up after %v, want exactly the 1 s budget (lookup included)", got)
		}
		want := []dialRecord{{"192.0.2.1", ms(400)}, {"192.0.2.2", ms(650)}}
		if got := f.records(); !slices.Equal(got, want) {
			t.Errorf("dials = %v, want %v", got, want)
		}
	})
}
