package main

import (
	"context"
	"errors"
	"io"
)

// runServe runs `tgrelay serve`. (Being written.)
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("serve: not implemented yet")
}
