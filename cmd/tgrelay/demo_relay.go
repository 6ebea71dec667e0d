package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Bounds of the demo's relay process.
const (
	// demoReadyTimeout bounds the wait for a started relay's /readyz.
	demoReadyTimeout = 30 * time.Second
	// demoStopTimeout bounds a graceful stop before the relay is killed.
	demoStopTimeout = 15 * time.Second
)

// demoRelay runs `tgrelay serve` as a child process of the same binary, so
// that the demo can kill it hard (SIGKILL) like a crash or an OOM kill would.
type demoRelay struct {
	bin       string
	args      []string
	env       []string
	adminAddr string
	log       *os.File // the child's stdout and stderr

	cmd  *exec.Cmd
	done chan error // receives cmd.Wait's result once
}

// freeLoopbackAddr returns a loopback address with a port that was free a
// moment ago. The relay listens there on every start, so the sandbox's
// webhook finds the restarted relay at the same address.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// childEnv is the parent's environment without TGRELAY_ variables (serve
// reads every flag from them), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TGRELAY_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// start launches the relay and waits until /readyz answers 200.
func (r *demoRelay) start(ctx context.Context) (pid int, err error) {
	cmd := exec.Command(r.bin, append([]string{"serve"}, r.args...)...)
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = r.log, r.log
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start relay: %w", err)
	}
	r.cmd = cmd
	r.done = make(chan error, 1)
	go func() { r.done <- cmd.Wait() }()

	run := ctx // the whole run's, bounded by --timeout
	ctx, cancel := context.WithTimeout(ctx, demoReadyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-r.done:
			r.done <- err
			return 0, fmt.Errorf("relay exited before it was ready (%v); see its log %s", err, r.log.Name())
		case <-ctx.Done():
			r.kill()
			if run.Err() != nil {
				// The run ended first (--timeout, or an interrupt), not the
				// relay's own bound.
				return 0, fmt.Errorf("relay not ready when the run ended (%v; see --timeout); see its log %s", run.Err(), r.log.Name())
			}
			return 0, fmt.Errorf("relay not ready within %s; see its log %s", demoReadyTimeout, r.log.Name())
		case <-tick.C:
		}
		resp, err := client.Get("http://" + r.adminAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd.Process.Pid, nil
			}
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (r *demoRelay) kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// stop asks the relay to shut down (SIGTERM) and waits, killing it after
// demoStopTimeout. It reports the exit error of a relay that did not exit 0.
func (r *demoRelay) stop() error {
	if r.cmd == nil {
		return nil
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(demoStopTimeout)
	defer t.Stop()
	select {
	case err := <-r.done:
		r.cmd = nil
		return err
	case <-t.C:
		r.kill()
		return errors.New("relay did not stop within the timeout; killed")
	}
}
