package sqlitestore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// childEnv names the database file a claiming child process works on.
const (
	childEnv      = "TGRELAY_SQLITESTORE_CLAIM_CHILD"
	childOrderEnv = "TGRELAY_SQLITESTORE_CLAIM_ORDER"
	processRows   = 300
)

// claimChild is the child process: it opens the file, says "ready", waits
// for "go" on stdin, tries to claim every row once and prints "won <id>
// <claim id>" for each claim it got. It returns the exit code.
func claimChild(path string) int {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{BusyTimeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 1
	}
	defer s.Close()
	fmt.Println("ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		fmt.Fprintln(os.Stderr, "child: no go signal:", line, err)
		return 1
	}
	opts := intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Hour), MaxAttempts: 10}
	for i := range processRows {
		id := int64(i + 1)
		if os.Getenv(childOrderEnv) == "desc" {
			id = processRows - int64(i)
		}
		got, ok, err := s.Claim(ctx, id, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child claim:", err)
			return 1
		}
		if ok {
			fmt.Printf("won %d %s\n", got.UpdateID, got.ClaimID)
		}
	}
	return 0
}

// TestTwoProcessesNeverBothWinAClaim runs two OS processes on one database
// file, both claiming the same rows (one ascending, one descending, so they
// collide in the middle), and checks that every row has exactly one winner,
// the one the row records.
func TestTwoProcessesNeverBothWinAClaim(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := make([]intake.Incoming, processRows)
	for i := range batch {
		batch[i] = intake.Incoming{UpdateID: int64(i + 1), Body: []byte("{}"), ReceivedAt: base}
	}
	if _, err := addBatch(t.Context(), s, batch); err != nil {
		t.Fatal(err)
	}

	type child struct {
		cmd  *exec.Cmd
		out  *bufio.Scanner
		in   interface{ Write([]byte) (int, error) }
		wins map[int64]string
	}
	var children []*child
	for _, order := range []string{"asc", "desc"} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+path, childOrderEnv+"="+order)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &child{cmd: cmd, out: bufio.NewScanner(stdout), in: stdin, wins: map[int64]string{}}
		if !c.out.Scan() || c.out.Text() != "ready" {
			t.Fatalf("child %s did not get ready: %q %v", order, c.out.Text(), c.out.Err())
		}
		children = append(children, c)
	}
	for _, c := range children {
		if _, err := c.in.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range children {
		for c.out.Scan() {
			f := strings.Fields(c.out.Text())
			if len(f) != 3 || f[0] != "won" {
				t.Fatalf("child said %q", c.out.Text())
			}
			id, _ := strconv.ParseInt(f[1], 10, 64)
			c.wins[id] = f[2]
		}
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}

	a, b := children[0].wins, children[1].wins
	if len(a)+len(b) != processRows {
		t.Errorf("winners: %d + %d, want %d in all", len(a), len(b), processRows)
	}
	for id := int64(1); id <= processRows; id++ {
		ca, inA := a[id]
		cb, inB := b[id]
		if inA == inB {
			t.Errorf("update %d: won by both=%v (want exactly one winner)", id, inA)
			continue
		}
		r, _, err := s.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if want := ca + cb; r.Attempts != 1 || r.ClaimID != want {
			t.Errorf("update %d: row attempts %d claim %s; want 1 and the winner's %s", id, r.Attempts, r.ClaimID, want)
		}
	}
	t.Logf("claims won: ascending child %d, descending child %d", len(a), len(b))
}
