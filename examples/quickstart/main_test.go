package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestQuickstart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"update 1 again (Telegram re-sent it)     -> 200",
		"a body that is not an update             -> 400",
		"update 4 with a wrong secret             -> 403",
		"attempt 3 handled \"flaky\"",
		"exhaustion acknowledged",
		"all as expected",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
