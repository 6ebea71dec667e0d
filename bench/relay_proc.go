package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"
)

// runRelayForwarder runs the relay scenario's non-durable forwarder, or
// with -floor-sqlite or -floor-postgres its floor, as a process of its own
// (the -proc variants, which relay starts): it prints its webhook URL as
// the first line of stdout and serves until its stdin closes or it is
// interrupted.
func runRelayForwarder(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("relay-forwarder", flag.ContinueOnError)
	target := fs.String("target", "", "the forward endpoint's URL")
	conns := fs.Int("conns", 40, "idle connections kept to the endpoint")
	floorSQLite := fs.String("floor-sqlite", "", "run the floor on this SQLite file instead")
	floorPostgres := fs.String("floor-postgres", "", "run the floor on this PostgreSQL database instead")
	floorStoreSQLite := fs.String("floor-store-sqlite", "", "run the contract floor (serve's store doing the guarantees' writes) on this SQLite file instead")
	floorStorePostgres := fs.String("floor-store-postgres", "", "run the contract floor on this PostgreSQL database instead")
	floorMinSQLite := fs.String("floor-min-sqlite", "", "run the least contract floor (the guarantees' writes on the bench's own schema) on this SQLite file instead")
	floorMinPostgres := fs.String("floor-min-postgres", "", "run the least contract floor on this PostgreSQL database instead")
	floorLogSQLite := fs.String("floor-log-sqlite", "", "run the log-shaped contract floor (the guarantees' writes as appends and a lease entry deleted, no row rewritten) on this SQLite file instead")
	floorLogWaitSQLite := fs.String("floor-log-wait-sqlite", "", "run the log-shaped contract floor with each settlement waiting for its commit, as a store's Settle does, on this SQLite file instead")
	floorLogPostgres := fs.String("floor-log-postgres", "", "run the log-shaped contract floor on this PostgreSQL database instead")
	floorLogWaitPostgres := fs.String("floor-log-wait-postgres", "", "run the log-shaped contract floor with settlements waited for on this PostgreSQL database instead")
	floorAddSQLite := fs.String("floor-add-sqlite", "", "run the write-ahead floor (the bare floor's row before the 200, no settlement) on this SQLite file instead")
	floorAddPostgres := fs.String("floor-add-postgres", "", "run the write-ahead floor on this PostgreSQL database instead")
	via := fs.String("floor-forward", floorForwardServe, "how a floor forwards: \"serve\" (serve's forward.Forwarder) or \"net/http\" (net/http's client, as the non-durable forwarder)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file`")
	traceFile := fs.String("trace", "", "write a runtime execution trace of the whole run to `file`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, w := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{{*traceFile, trace.Start, trace.Stop}, {*cpuprofile, pprof.StartCPUProfile, pprof.StopCPUProfile}} {
		if w.path == "" {
			continue
		}
		f, err := os.Create(w.path)
		if err != nil {
			return err
		}
		if err := w.start(f); err != nil {
			f.Close()
			return err
		}
		defer f.Close()
		defer w.stop()
	}
	if *target == "" {
		return errors.New("-target is required")
	}
	var (
		url  string
		stop func()
		st   floorStore
		err  error
	)
	switch {
	case *floorSQLite != "":
		st, err = openFloorSQLite(ctx, *floorSQLite)
	case *floorPostgres != "":
		st, err = openFloorPostgres(ctx, *floorPostgres)
	case *floorStoreSQLite != "":
		st, err = openFloorContractSQLite(ctx, *floorStoreSQLite)
	case *floorStorePostgres != "":
		st, err = openFloorContractPostgres(ctx, *floorStorePostgres)
	case *floorMinSQLite != "":
		st, err = openFloorMinSQLite(ctx, *floorMinSQLite)
	case *floorMinPostgres != "":
		st, err = openFloorMinPostgres(ctx, *floorMinPostgres)
	case *floorLogSQLite != "":
		st, err = openFloorLogSQLite(ctx, *floorLogSQLite, false)
	case *floorLogWaitSQLite != "":
		st, err = openFloorLogSQLite(ctx, *floorLogWaitSQLite, true)
	case *floorLogPostgres != "":
		st, err = openFloorLogPostgres(ctx, *floorLogPostgres, false)
	case *floorLogWaitPostgres != "":
		st, err = openFloorLogPostgres(ctx, *floorLogWaitPostgres, true)
	case *floorAddSQLite != "":
		st, err = openFloorSQLite(ctx, *floorAddSQLite)
		st = floorAddOnly{st}
	case *floorAddPostgres != "":
		st, err = openFloorPostgres(ctx, *floorAddPostgres)
		st = floorAddOnly{st}
	}
	if err != nil {
		return err
	}
	if st != nil {
		f, err := startRelayFloor(st, *target, *via)
		if err != nil {
			return err
		}
		url, stop = f.url, f.close
	} else {
		f, err := startNaiveForwarder(*target, *conns)
		if err != nil {
			return err
		}
		url, stop = f.url, f.close
	}
	defer stop()
	fmt.Fprintln(out, url)
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-ctx.Done():
	case <-stdinClosed:
	}
	return nil
}

// forwarderProc is the non-durable forwarder running as a child process.
type forwarderProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

// startForwarderProc starts this binary's relay-forwarder towards target,
// with extra flags, and waits for its URL.
func startForwarderProc(ctx context.Context, target string, conns int, extra ...string) (*forwarderProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{"relay-forwarder", "-target", target, "-conns", fmt.Sprint(conns)}, extra...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the forwarder process: %w", err)
	}
	p := &forwarderProc{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p.url = <-line:
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	if !strings.HasPrefix(p.url, "http://") {
		p.stop()
		return nil, errors.New("the forwarder process printed no URL")
	}
	return p, nil
}

// stop ends the process (closing its stdin) and waits for it.
func (p *forwarderProc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
