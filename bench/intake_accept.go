package main

import (
	"context"
	"errors"
	"io"
)

// runIntakeAccept is not written yet.
func runIntakeAccept(ctx context.Context, args []string, out io.Writer) error {
	return errors.New("scenario not implemented yet")
}
