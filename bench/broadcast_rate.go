package main

import (
	"context"
	"errors"
	"io"
)

// runBroadcastRate is not written yet.
func runBroadcastRate(ctx context.Context, args []string, out io.Writer) error {
	return errors.New("scenario not implemented yet")
}
