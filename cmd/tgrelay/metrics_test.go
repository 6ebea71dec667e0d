package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
)

func TestFailureReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{intake.RetryLater(&forward.StatusError{Kind: "update", Code: 429}, 1), "http_429"},
		{&forward.StatusError{Kind: "update", Code: 503}, "http_503"},
		{intake.Abandon(&forward.StatusError{Kind: "update", Code: 404}), "http_4xx"},
		{&forward.StatusError{Kind: "update", Code: 502}, "http_5xx"},
		{&intake.PanicError{Value: "x"}, "panic"},
		{fmt.Errorf("x: %w", intake.ErrUnparsableBody), "unparsable"},
		{fmt.Errorf("forward: update to endpoint failed: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("forward: %w", context.Canceled), "cancelled"},
		{fmt.Errorf("forward: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), "connection"},
		{errors.New("something"), "other"},
	} {
		if got := failureReason(tc.err); got != tc.want {
			t.Errorf("failureReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
