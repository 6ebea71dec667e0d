package dashboard_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/broadcast"
	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A broadcast being sent shows as running, with its progress; a directory
// entry that is not a broadcast is left out, and a broadcast without its
// audience snapshot says so.
func TestBroadcastRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "not started"), 0o700); err != nil { // not a valid name
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	sending := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := broadcast.Run(context.Background(), broadcast.Config{
			Name: "live", Dir: dir, Rate: 1000, Concurrency: 1,
			AudienceFunc: func(context.Context) ([]broadcast.Recipient, error) {
				return []broadcast.Recipient{broadcast.ChatID(1), broadcast.ChatID(2), broadcast.ChatID(3)}, nil
			},
			SendFunc: func(ctx context.Context, r broadcast.Recipient) error {
				if r.ID == 2 {
					select {
					case sending <- struct{}{}:
					default:
					}
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				return nil
			},
			ClassifyFunc: func(error) broadcast.Verdict { return broadcast.Failed("x") },
		})
		done <- err
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
		<-done
	}()
	select {
	case <-sending:
	case <-time.After(30 * time.Second):
		t.Fatal("the broadcast never reached its second recipient")
	}
	s := serve(t, dashboard.Config{Store: memstore.New(), BroadcastDir: dir})
	_, page := s.get(t, "/broadcasts")
	mustContain(t, "broadcasts", page, "live", "● running", "empty", "no audience snapshot yet")
	if strings.Contains(page, "not started") {
		t.Error("a directory with an invalid name is listed")
	}
	_, one := s.get(t, "/broadcasts/live")
	mustContain(t, "running broadcast", one, "● running", `<dd class="num">1</dd>`, "<dt>rate</dt>", "measuring…", "<dt>ETA</dt>")
	close(release)
	released = true
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	_, page = s.get(t, "/broadcasts/live")
	mustContain(t, "finished broadcast", page, "○ not running", "100.00%")
	if strings.Contains(page, "<dt>ETA</dt>") {
		t.Error("a broadcast that is not running shows an ETA")
	}
	if code, _ := s.get(t, "/broadcasts/nope"); code != 404 {
		t.Errorf("unknown broadcast: %d, want 404", code)
	}
	if code, _ := s.get(t, "/broadcasts/..%2f..%2fetc"); code != 404 {
		t.Errorf("a path outside the directory: %d, want 404", code)
	}
}
