package main

import (
	"errors"
	"io"
	"os"
	"testing"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// TestChatOrderStrictUnderKills is the short chat-order scenario: three
// real serve processes with --chat-order strict on one PostgreSQL, 20
// chats, random SIGKILLs. No update may be forwarded while an earlier one
// of its chat is unanswered, nor while another of its chat runs, and none
// may be overtaken or lost.
func TestChatOrderStrictUnderKills(t *testing.T) {
	ctx, bin, dir := buildForTest(t)
	cluster, err := pgtest.Start(ctx, pgtest.Options{Fast: true})
	if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skipf("PostgreSQL is not installed (%v); set %s=1 to fail instead", err, pgtest.EnvRequire)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	res, err := chatOrderRun(ctx, bin, dir, cluster, "strict", 400, 20, 100, 3, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.kills < 3 || !res.clean() || res.forwards < res.updates {
		t.Fatalf("%+v: want 3+ kills, nothing overtaken, concurrent, early, lost or left unsettled", res)
	}
}
