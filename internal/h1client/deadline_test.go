package h1client_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/tgrelay/tgrelay/internal/h1client"
)

func TestAfterDone(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()

	ctx, cancel := context.WithCancel(t.Context())
	stop := h1client.AfterDone(ctx, a)
	read := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 1))
		read <- err
	}()
	cancel()
	if err := <-read; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read blocked when ctx ended: %v; want it ended by the deadline", err)
	}
	if stop() {
		t.Error("stop after ctx ended the watch reported true")
	}

	if !h1client.AfterDone(t.Context(), b)() {
		t.Error("stop before ctx ended reported false")
	}
	if !h1client.AfterDone(context.Background(), b)() {
		t.Error("stop of a ctx that never ends reported false")
	}
}
