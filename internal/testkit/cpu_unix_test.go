//go:build unix

package testkit_test

import (
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
)

// ProcessCPU grows as this process spends CPU: a busy loop sees it pass
// 10ms more (within a minute, however loaded the machine).
func TestProcessCPUGrowsWithWork(t *testing.T) {
	before := testkit.ProcessCPU(t)
	deadline := time.Now().Add(time.Minute)
	for testkit.ProcessCPU(t)-before < 10*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("ProcessCPU grew %v in a minute of a busy loop", testkit.ProcessCPU(t)-before)
		}
	}
}
