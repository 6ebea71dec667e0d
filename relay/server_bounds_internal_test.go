package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// Each time bound of the relay's HTTP servers ends a connection that
// would otherwise hold its goroutine and buffers for as long as the peer
// liked: one that sends nothing, headers trickled a byte at a time
// (slowloris), a body trickled the same way, and a kept-alive connection
// left idle. The bounds are shortened here; New sets the constants.
func TestServerBoundsEndStalledConnections(t *testing.T) {
	t.Parallel()
	const secret = "bounds-test_secret"
	r := &Relay{log: slog.New(slog.DiscardHandler), fatal: make(chan error, 1),
		bounds: serverBounds{readHeader: 100 * time.Millisecond, read: 300 * time.Millisecond, idle: 200 * time.Millisecond}}
	runner, err := intake.New(intake.Config{Store: memstore.New(), Handler: func(context.Context, intake.Update) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: runner, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.serve("webhook", "Listen", "", l, wh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.srv.Close()
		r.bg.Wait()
	})
	head := "POST /telegram HTTP/1.1\r\nHost: tgrelay\r\n" + intake.SecretHeader + ": " + secret + "\r\n"
	body := `{"update_id":1}`
	for _, tc := range []struct {
		name    string
		first   string // written at once
		trickle string // then written a byte at a time, forever
	}{
		{"silent", "", ""},
		{"trickled headers", "", head},
		{"trickled body", head + fmt.Sprintf("Content-Length: %d\r\n\r\n", 1<<20), body + body + body},
		{"idle after a request", head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.first); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			if tc.trickle != "" {
				go func() {
					tick := time.NewTicker(10 * time.Millisecond)
					defer tick.Stop()
					for i := 0; ; i = (i + 1) % len(tc.trickle) {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						if _, err := c.Write([]byte{tc.trickle[i]}); err != nil {
							return
						}
					}
				}()
			}
			// The server ends the connection: the read meets its end long
			// before this deadline, whatever it answered first.
			if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			_, err = io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open after %v", time.Since(began).Round(time.Millisecond))
			}
		})
	}
}
