package main

import (
	"context"
	"errors"
	"io"
)

// runRelay is not written yet.
func runRelay(ctx context.Context, args []string, out io.Writer) error {
	return errors.New("scenario not implemented yet")
}
