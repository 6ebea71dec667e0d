package main

import (
	"context"
	"errors"
	"io"
)

// runHappyEyeballs is not written yet.
func runHappyEyeballs(ctx context.Context, args []string, out io.Writer) error {
	return errors.New("scenario not implemented yet")
}
