package testkit_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
)

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	testkit.WaitFor(t, "three increments", func() bool { return n.Load() == 3 })
}

func TestSyncBufferKeepsEveryWrite(t *testing.T) {
	t.Parallel()
	var buf testkit.SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&buf, "%d.%d\n", i, j)
			}
		})
	}
	wg.Wait()
	if got := strings.Count(buf.String(), "\n"); got != 800 {
		t.Fatalf("%d lines, want 800", got)
	}
}

func TestFreeAddrCanBeListenedOn(t *testing.T) {
	t.Parallel()
	addr := testkit.FreeAddr(t)
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("FreeAddr = %q", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	l.Close()
}

func TestClockMovesOnlyWhenMoved(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	c := testkit.NewClock(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	c.Advance(90 * time.Second)
	if want := start.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after Advance: %v, want %v", c.Now(), want)
	}
}
