package main

import (
	"errors"
	"strings"
	"testing"
)

// One name for an unacknowledged exhaustion: ls prints "exhausted", ls
// --state exhausted lists exactly those rows, show says it, and a wrong
// --state names the states, exhausted among them.
func TestUpdatesStateExhausted(t *testing.T) {
	t.Parallel()
	fx := newUpdatesFixture(t)
	out, err := runUpdatesCapture(t, "ls", "--state", "exhausted", "--db", fx.db)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "4 ") || !strings.Contains(lines[1], "exhausted") {
		t.Errorf("ls --state exhausted, want the header and update 4, exhausted:\n%s", out)
	}
	show, err := runUpdatesCapture(t, "show", "4", "--db", fx.db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(show, "state:     exhausted") {
		t.Errorf("show names the state otherwise:\n%s", show)
	}
	_, err = runUpdatesCapture(t, "ls", "--state", "dead", "--db", fx.db)
	if err == nil || !strings.Contains(err.Error(), `--state "dead" is not a state`) {
		t.Fatalf("--state dead: %v", err)
	}
	if ue, ok := errors.AsType[*usageError](err); !ok || !strings.Contains(ue.hint, "exhausted") {
		t.Errorf("--state dead: hint %+v, want the states, exhausted among them", ue)
	}
}
