//go:build !unix

package testkit

import (
	"testing"
	"time"
)

// ProcessCPU is the CPU time this process has used so far; where the
// system does not report it, always 0.
func ProcessCPU(testing.TB) time.Duration { return 0 }
