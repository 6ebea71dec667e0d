package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// relayCPU is CPU time spent during one run of the relay scenario.
type relayCPU struct {
	serve    time.Duration // the serve child measured (zero for a relay in this process)
	bench    time.Duration // this process: load generator and sink, and a relay running here
	postgres time.Duration // the PostgreSQL cluster's processes (zero without one)
	machine  time.Duration // every CPU of the machine, busy (other agents included)
}

func (c relayCPU) minus(o relayCPU) relayCPU {
	return relayCPU{serve: c.serve - o.serve, bench: c.bench - o.bench, postgres: c.postgres - o.postgres, machine: c.machine - o.machine}
}

// relayCPUSnapshot reads the CPU time spent so far by the serve child pid
// (none when 0), by this process and by the PostgreSQL cluster whose server
// is postmaster (none when 0).
func relayCPUSnapshot(pid, postmaster int) (relayCPU, error) {
	var serves []int
	if pid != 0 {
		serves = append(serves, pid)
	}
	t, err := cpuSnapshot(serves, postmaster)
	if err != nil {
		return relayCPU{}, fmt.Errorf("relay: reading CPU times: %w", err)
	}
	return relayCPU{serve: t.relays, bench: t.bench, postgres: t.postgres, machine: t.machine}, nil
}

// printRelayCPU prints each variant's CPU per update (medians over its
// rounds). A serve child's CPU is read from /proc; a relay that runs inside
// this process (the floors, the non-durable forwarder) shares it with the
// load generator and the sink, so its CPU is this process's less what the
// generator and sink spent in the serve rounds (their median per update).
func printRelayCPU(out io.Writer, variants []*relayVariant) {
	per := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
	medianOf := func(v *relayVariant, f func(relayResult) float64) float64 {
		xs := make([]float64, len(v.results))
		for i, r := range v.results {
			xs[i] = f(r)
		}
		return median(xs)
	}
	// The generator's and the sink's CPU per update, from the rounds where
	// nothing else ran in this process.
	var genSink []float64
	for _, v := range variants {
		if v.pid == 0 {
			continue
		}
		for _, r := range v.results {
			genSink = append(genSink, per(r.cpu.bench, r.n))
		}
	}
	if len(genSink) == 0 {
		return
	}
	gs := median(genSink)
	withPG := slices.ContainsFunc(variants, func(v *relayVariant) bool { return strings.Contains(v.name, "postgres") })
	fmt.Fprintf(out, "\nCPU per update (medians of rounds; the load generator and sink take %.0f µs of this process's)\n", gs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\trelay µs\tpostgres µs\tmachine µs\tmachine busy\t")
	for _, v := range variants {
		relay := medianOf(v, func(r relayResult) float64 { return per(r.cpu.serve, r.n) })
		how := ""
		if v.pid == 0 {
			relay = medianOf(v, func(r relayResult) float64 { return per(r.cpu.bench, r.n) }) - gs
			how = " (in this process)"
		}
		pg := "-"
		switch {
		case strings.Contains(v.name, "postgres"):
			pg = fmt.Sprintf("%.0f", medianOf(v, func(r relayResult) float64 { return per(r.cpu.postgres, r.n) }))
		case withPG:
			// What the cluster spent beside a variant that does not use
			// it (its background work, on the same two cores).
			pg = fmt.Sprintf("(%.0f)", medianOf(v, func(r relayResult) float64 { return per(r.cpu.postgres, r.n) }))
		}
		machine := medianOf(v, func(r relayResult) float64 { return per(r.cpu.machine, r.n) })
		busy := medianOf(v, func(r relayResult) float64 { return r.cpu.machine.Seconds() / r.forwarded.Seconds() })
		fmt.Fprintf(tw, "%s\t%.0f%s\t%s\t%.0f\t%.2f cores\t\n", v.name, relay, how, pg, machine, busy)
	}
	tw.Flush()
}
