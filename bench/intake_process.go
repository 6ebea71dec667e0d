package main

import (
	"context"
	"errors"
	"io"
)

// runIntakeProcess is not written yet.
func runIntakeProcess(ctx context.Context, args []string, out io.Writer) error {
	return errors.New("scenario not implemented yet")
}
