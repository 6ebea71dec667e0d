package main

import (
	"context"
	"errors"
	"io"
)

// runDemo runs `tgrelay demo`. (Being written.)
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("demo: not implemented yet")
}
