package main

import (
	"context"
	"errors"
	"io"
)

// runTransport is not written yet.
func runTransport(ctx context.Context, args []string, out io.Writer) error {
	return errors.New("scenario not implemented yet")
}
