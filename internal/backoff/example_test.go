package backoff_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
)

// A retry loop: the delay doubles from 1 s up to 10 s, and the wait ends
// early when the caller's context does.
func Example() {
	b := backoff.Capped{Base: time.Second, Max: 10 * time.Second}
	for attempt := 1; attempt <= 5; attempt++ {
		fmt.Println(attempt, b.Delay(attempt))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println(backoff.Sleep(ctx, b.Delay(1)))
	// Output:
	// 1 1s
	// 2 2s
	// 3 4s
	// 4 8s
	// 5 10s
	// context canceled
}

// The intake runner's default policy: 5 s × 4^(attempt−1), capped at 15 min.
func ExampleCapped_Delay() {
	b := backoff.Capped{Base: 5 * time.Second, Factor: 4, Max: 15 * time.Minute}
	fmt.Println(b.Delay(1), b.Delay(2), b.Delay(3), b.Delay(4), b.Delay(5), b.Delay(1000))
	// Output: 5s 20s 1m20s 5m20s 15m0s 15m0s
}
