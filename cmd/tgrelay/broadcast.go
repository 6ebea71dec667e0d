package main

import (
	"context"
	"errors"
	"io"
)

// runBroadcast is `tgrelay broadcast run|status` (work in progress).
func runBroadcast(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
