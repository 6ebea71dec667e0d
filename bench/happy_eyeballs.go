package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/tgrelay/tgrelay/transport"
)

// runHappyEyeballs measures the time to a connected socket when the first
// of a host's two addresses never answers.
//
// Method: the host "telegram.test" has two A records, 127.0.0.2 then
// 127.0.0.1; a real listener runs on 127.0.0.1. 127.0.0.2 is made a
// deterministic black hole inside the dialers themselves: a net.Dialer
// ControlContext hook that, for that address, blocks before connect(2) until
// the attempt's context ends (as a SYN into a filtered network does). Both
// sides use that same hook:
//
//   - tgrelay: transport.(*Transport).DialContext with LookupFunc returning
//     the two addresses and DialFunc = net.Dialer{ControlContext: hole}.
//   - baseline: an unmodified net.Dialer{Timeout: budget, ControlContext:
//     hole} dialing the host name, resolved by a real net.Resolver whose DNS
//     queries are answered in process (heStubResolver). Go dials the two
//     IPv4 addresses serially, giving the first max(budget/2, 2 s).
//
// Both get the same budget (transport.DefaultConnectTimeout); without a
// timeout net.Dialer would wait for the kernel's SYN retries (minutes). The
// runs alternate, tgrelay first, for -rounds rounds.
func runHappyEyeballs(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("happy-eyeballs", flag.ContinueOnError)
	rounds := fs.Int("rounds", 5, "alternating rounds")
	budget := fs.Duration("budget", transport.DefaultConnectTimeout, "connect budget for both dialers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	holeAddr := netip.MustParseAddr("127.0.0.2")
	realAddr := netip.MustParseAddr("127.0.0.1")
	rec := &heDialRecorder{hole: holeAddr}

	tr, err := transport.New(transport.Config{
		ConnectTimeout: *budget,
		LookupFunc: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			if network == "ip6" {
				return nil, nil
			}
			return []netip.Addr{holeAddr, realAddr}, nil
		},
		DialFunc: (&net.Dialer{ControlContext: rec.control}).DialContext,
	})
	if err != nil {
		return err
	}
	std := &net.Dialer{
		Timeout:        *budget,
		ControlContext: rec.control,
		Resolver:       heStubResolver([]netip.Addr{holeAddr, realAddr}),
	}
	dialers := []struct {
		name string
		dial func(ctx context.Context) (net.Conn, error)
	}{
		{"tgrelay", func(ctx context.Context) (net.Conn, error) {
			return tr.DialContext(ctx, "tcp", net.JoinHostPort("telegram.test", port))
		}},
		{"net.Dialer", func(ctx context.Context) (net.Conn, error) {
			return std.DialContext(ctx, "tcp", net.JoinHostPort("telegram.test.", port))
		}},
	}
	times := make([][]time.Duration, len(dialers))
	orders := make([][]string, len(dialers))
	fmt.Fprintf(out, "happy-eyeballs: first of 2 addresses black-holed (%s, then %s), budget %v, %d rounds\n\n",
		holeAddr, realAddr, *budget, *rounds)
	fmt.Fprintf(out, "%-6s %-11s %12s  %s\n", "round", "dialer", "connect", "dial order")
	for r := range *rounds {
		for i, d := range dialers {
			if err := ctx.Err(); err != nil {
				return err
			}
			rec.reset()
			start := time.Now()
			c, err := d.dial(ctx)
			el := time.Since(start)
			if err != nil {
				return fmt.Errorf("%s: %w", d.name, err)
			}
			if got := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != realAddr {
				c.Close()
				return fmt.Errorf("%s connected to %v", d.name, got)
			}
			c.Close()
			order := rec.order()
			if len(order) == 0 || order[0] != holeAddr.String() {
				return fmt.Errorf("%s did not dial the black hole first (order %v): the scenario is void", d.name, order)
			}
			times[i] = append(times[i], el)
			orders[i] = order
			fmt.Fprintf(out, "%-6d %-11s %12v  %v\n", r+1, d.name, el.Round(time.Microsecond), order)
		}
	}
	med := make([]time.Duration, len(dialers))
	for i := range dialers {
		med[i] = heMedian(times[i])
	}
	ratio := float64(med[1]) / float64(med[0])
	fmt.Fprintf(out, "\n%-11s %12s\n", "dialer", "median")
	for i, d := range dialers {
		fmt.Fprintf(out, "%-11s %12v\n", d.name, med[i].Round(time.Microsecond))
	}
	goal := "met"
	if ratio < 5 {
		goal = "NOT met"
	}
	fmt.Fprintf(out, "\ntgrelay is %.1fx faster to a connected socket (goal >= 5x: %s)\n", ratio, goal)
	fmt.Fprintf(out, "RESULT happy-eyeballs tgrelay_ms=%.1f netdialer_ms=%.1f speedup=%.2f goal_5x=%t rounds=%d\n",
		ms(med[0]), ms(med[1]), ratio, ratio >= 5, *rounds)
	return nil
}

// heDialRecorder is a ControlContext hook that records the order of connect
// attempts and black-holes one address until the attempt's context ends.
type heDialRecorder struct {
	hole netip.Addr
	mu   sync.Mutex
	seen []string
}

func (d *heDialRecorder) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.seen = append(d.seen, ap.Addr().String())
	d.mu.Unlock()
	if ap.Addr() == d.hole {
		<-ctx.Done()
		return errors.New("black hole: no answer before the attempt ended")
	}
	return nil
}

func (d *heDialRecorder) reset() {
	d.mu.Lock()
	d.seen = nil
	d.mu.Unlock()
}

func (d *heDialRecorder) order() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

func heMedian(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
