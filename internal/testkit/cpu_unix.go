//go:build unix

package testkit

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the CPU time, user and system, this process has used so
// far: a benchmark reads it before and after to report CPU per op.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
