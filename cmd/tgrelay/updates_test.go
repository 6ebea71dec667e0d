package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// updatesFixture is a SQLite store file holding one row per interesting
// state: 1 pending, 2 completed, 3 failed, 4 an unacknowledged exhaustion.
type updatesFixture struct {
	db        string
	exhausted intake.Identity
}

func newUpdatesFixture(t *testing.T) updatesFixture {
	t.Helper()
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "tgrelay.db")
	st, err := openStore(ctx, db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for id := int64(1); id <= 4; id++ {
		body := []byte(`{"update_id":` + strconv.FormatInt(id, 10) + `,"message":{"chat":{"id":7},"text":"hi ` + strconv.FormatInt(id, 10) + `"}}`)
		if ok, err := st.store.Add(ctx, intake.Incoming{UpdateID: id, Body: body, ReceivedAt: now}); err != nil || !ok {
			t.Fatalf("add %d: %v %v", id, ok, err)
		}
	}
	claim := func(id int64) intake.Identity {
		ident, ok, err := st.store.Claim(ctx, id, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 5})
		if err != nil || !ok {
			t.Fatalf("claim %d: %v %v", id, ok, err)
		}
		return ident
	}
	settle := func(ident intake.Identity, s intake.Settlement) {
		if ok, err := st.store.Settle(ctx, ident, s); err != nil || !ok {
			t.Fatalf("settle %d: %v %v", ident.UpdateID, ok, err)
		}
	}
	settle(claim(2), intake.Settlement{State: intake.StateCompleted, At: now})
	settle(claim(3), intake.Settlement{State: intake.StateFailed, At: now, RetryAt: now.Add(time.Hour), Error: "endpoint answered 500"})
	ex := claim(4)
	if ok, err := st.store.Exhaust(ctx, ex, now, "endpoint answered 400 Bad Request"); err != nil || !ok {
		t.Fatalf("exhaust: %v %v", ok, err)
	}
	return updatesFixture{db: db, exhausted: ex}
}

func runUpdatesCapture(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out bytes.Buffer
	err = runUpdates(t.Context(), args, &out, &out)
	return out.String(), err
}

func TestUpdatesList(t *testing.T) {
	t.Parallel()
	fx := newUpdatesFixture(t)

	out, err := runUpdatesCapture(t, "ls", "--db", fx.db)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"UPDATE_ID", "pending", "completed", "failed", "exhausted", "endpoint answered 500", fx.exhausted.ClaimID} {
		if !strings.Contains(out, want) {
			t.Errorf("ls output lacks %q:\n%s", want, out)
		}
	}

	out, err = runUpdatesCapture(t, "ls", "--db", fx.db, "--state", "failed", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []rowJSON
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].UpdateID != 3 || rows[0].State != string(intake.StateFailed) || rows[0].Attempts != 1 {
		t.Errorf("ls --state failed --json = %+v, want only update 3, failed, attempt 1", rows)
	}

	// Paging: --limit 2 shows 1 and 2 and says where to go on; --after 2 the rest.
	out, err = runUpdatesCapture(t, "ls", "--db", fx.db, "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "--after 2") || strings.Contains(out, "\n3 ") {
		t.Errorf("ls --limit 2:\n%s", out)
	}
	out, err = runUpdatesCapture(t, "--db", fx.db, "--after", "2", "ls", "--json")
	if err != nil {
		t.Fatal(err)
	}
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 || rows[0].UpdateID != 3 {
		t.Errorf("ls --after 2 = %+v (%v)", rows, err)
	}

	out, err = runUpdatesCapture(t, "exhausted", "--db", fx.db, "--json")
	if err != nil {
		t.Fatal(err)
	}
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].UpdateID != 4 || !rows[0].Unacknowledged {
		t.Errorf("exhausted = %+v (%v), want update 4 unacknowledged", rows, err)
	}
}

func TestUpdatesShow(t *testing.T) {
	t.Parallel()
	fx := newUpdatesFixture(t)
	out, err := runUpdatesCapture(t, "show", "4", "--db", fx.db)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"unacknowledged exhaustion", fx.exhausted.ClaimID, "400 Bad Request", "body:\n{\n  \"update_id\": 4,"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out, err = runUpdatesCapture(t, "show", "--json", "4", "--db", fx.db)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Body struct {
			Message struct{ Text string } `json:"message"`
		} `json:"body"`
		ClaimID string `json:"claim_id"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Body.Message.Text != "hi 4" || r.ClaimID != fx.exhausted.ClaimID {
		t.Errorf("show --json = %+v (%v)\n%s", r, err, out)
	}
	if _, err := runUpdatesCapture(t, "show", "99", "--db", fx.db); err == nil || !strings.Contains(err.Error(), "not in the store") {
		t.Errorf("show of a missing row: %v", err)
	}
}

func TestUpdatesAck(t *testing.T) {
	t.Parallel()
	fx := newUpdatesFixture(t)
	attempt := strconv.Itoa(fx.exhausted.Attempt)

	// A wrong claim id or a wrong attempt is refused and changes nothing.
	for _, args := range [][]string{
		{"ack", "4", "--attempt", attempt, "--claim-id", "not-the-claim"},
		{"ack", "4", "--attempt", "2", "--claim-id", fx.exhausted.ClaimID},
	} {
		_, err := runUpdatesCapture(t, append(args, "--db", fx.db)...)
		if err == nil || !strings.Contains(err.Error(), "no unacknowledged exhaustion") {
			t.Errorf("%v: err = %v, want a refusal", args, err)
		}
	}
	// Without an identity and without --yes: a usage error naming the identity.
	_, err := runUpdatesCapture(t, "ack", "4", "--db", fx.db)
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(ue.hint, "--claim-id "+fx.exhausted.ClaimID) {
		t.Errorf("ack without identity: %v", err)
	}
	if out, _ := runUpdatesCapture(t, "exhausted", "--db", fx.db); !strings.Contains(out, fx.exhausted.ClaimID) {
		t.Fatalf("a refused ack changed the row:\n%s", out)
	}

	out, err := runUpdatesCapture(t, "ack", "4", "--attempt", attempt, "--claim-id", fx.exhausted.ClaimID, "--db", fx.db)
	if err != nil || !strings.Contains(out, "acknowledged update 4") {
		t.Fatalf("ack with the exact identity: %v\n%s", err, out)
	}
	if out, _ := runUpdatesCapture(t, "exhausted", "--db", fx.db); !strings.Contains(out, "no updates") {
		t.Errorf("after ack, exhausted still lists:\n%s", out)
	}
	// A second ack of the same identity is refused.
	if _, err := runUpdatesCapture(t, "ack", "4", "--attempt", attempt, "--claim-id", fx.exhausted.ClaimID, "--db", fx.db); err == nil {
		t.Error("second ack succeeded")
	}
}

func TestUpdatesAckYes(t *testing.T) {
	t.Parallel()
	fx := newUpdatesFixture(t)
	out, err := runUpdatesCapture(t, "ack", "4", "--yes", "--json", "--db", fx.db)
	if err != nil {
		t.Fatal(err)
	}
	var r ackResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || !r.Acknowledged || r.ClaimID != fx.exhausted.ClaimID {
		t.Errorf("ack --yes = %+v (%v)", r, err)
	}
	// --yes on a row that is not an exhaustion is refused.
	if _, err := runUpdatesCapture(t, "ack", "3", "--yes", "--db", fx.db); err == nil || !strings.Contains(err.Error(), "not an unacknowledged exhaustion") {
		t.Errorf("ack --yes of a failed row: %v", err)
	}
}

func TestUpdatesRequeue(t *testing.T) {
	t.Parallel()
	fx := newUpdatesFixture(t)
	out, err := runUpdatesCapture(t, "requeue", "4", "--db", fx.db)
	if err != nil || !strings.Contains(out, "requeued update 4") {
		t.Fatalf("requeue: %v\n%s", err, out)
	}
	out, err = runUpdatesCapture(t, "show", "4", "--json", "--db", fx.db)
	if err != nil {
		t.Fatal(err)
	}
	var r rowJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.State != string(intake.StatePending) || r.Attempts != 0 || r.Unacknowledged {
		t.Errorf("after requeue: %+v (%v)", r, err)
	}
	// The old identity can no longer acknowledge the row.
	if _, err := runUpdatesCapture(t, "ack", "4", "--attempt", "1", "--claim-id", fx.exhausted.ClaimID, "--db", fx.db); err == nil {
		t.Error("ack of a requeued row with its old identity succeeded")
	}
	// Completed rows are not requeued.
	if _, err := runUpdatesCapture(t, "requeue", "2", "--db", fx.db); err == nil || !strings.Contains(err.Error(), "completed") {
		t.Errorf("requeue of a completed row: %v", err)
	}
}

func TestUpdatesUsage(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "never-created.db")
	for _, args := range [][]string{
		{},
		{"frob"},
		{"show"},
		{"show", "x"},
		{"show", "-1"},
		{"ls", "extra"},
		{"ls", "--limit", "0"},
		{"ls", "--limit", strconv.Itoa(maxListLimit + 1)},
		{"ls", "--state", "nope"},
		{"exhausted", "--state", "failed"},
		{"ack", "4", "--attempt", "1"},
		{"ack", "4", "--claim-id", "c"},
		{"ack", "4", "--attempt", "1", "--claim-id", "c", "--yes"},
		{"ls", "--after", "x"},
	} {
		_, err := runUpdatesCapture(t, append(args, "--db", db)...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
	if out, err := runUpdatesCapture(t, "-h"); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "ack ID --attempt N --claim-id C") {
		t.Errorf("-h: %v\n%s", err, out)
	}
	// Every exit path of run: a missing database is a usage error (2),
	// and creates nothing; a refusal is 1.
	var out bytes.Buffer
	if code := run(context.Background(), []string{"updates", "show", "1", "--db", db}, &out, &out); code != exitUsage {
		t.Errorf("run updates show on a missing database: exit %d, want %d", code, exitUsage)
	}
	st, err := openStore(t.Context(), db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if code := run(context.Background(), []string{"updates", "show", "1", "--db", db}, &out, &out); code != exitError {
		t.Errorf("run updates show missing: exit %d", code)
	}
}

// FuzzParseInterleaved checks the argument parser of updates and webhook on
// arbitrary command lines: it never panics, returns the positional arguments
// in their order, and never takes a flag for a positional argument.
func FuzzParseInterleaved(f *testing.F) {
	for _, seed := range []string{
		"ack 42 --attempt 3 --claim-id abc",
		"--db x.db ls --state failed",
		"show -- -5",
		"ls --limit",
		"ack 1 --yes=true extra",
		"--json --after 9 exhausted",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		fs := flag.NewFlagSet("updates", flag.ContinueOnError)
		fs.String("db", "", "")
		fs.Int("attempt", 0, "")
		fs.String("claim-id", "", "")
		fs.Bool("yes", false, "")
		fs.Bool("json", false, "")
		pos, err := parseInterleaved(fs, args, io.Discard)
		if err != nil {
			return
		}
		// pos is a subsequence of args.
		j := 0
		for _, a := range args {
			if j < len(pos) && a == pos[j] {
				j++
			}
		}
		if j != len(pos) {
			t.Fatalf("positional %q is not a subsequence of %q", pos, args)
		}
		dashdash := slices.Index(args, "--")
		for _, p := range pos {
			if strings.HasPrefix(p, "-") && len(p) > 1 && dashdash < 0 {
				t.Fatalf("flag %q returned as positional from %q", p, args)
			}
		}
	})
}

// TestUpdatesReadsServesDatabaseVariable: with serve's environment
// (TGRELAY_DB), updates opens serve's store without --db, as its refusal
// of a missing --db tells the user; --db on the command line wins.
func TestUpdatesReadsServesDatabaseVariable(t *testing.T) {
	fx := newUpdatesFixture(t)
	t.Setenv("TGRELAY_DB", fx.db)
	code, stdout, stderr := runCapture(t, "updates", "exhausted")
	if code != exitOK || !strings.Contains(stdout, strconv.FormatInt(fx.exhausted.UpdateID, 10)) {
		t.Errorf("updates exhausted with TGRELAY_DB: exit %d, stdout %q, stderr %q; want the fixture's exhaustion", code, stdout, stderr)
	}
	missing := filepath.Join(t.TempDir(), "other.db")
	code, _, stderr = runCapture(t, "updates", "ls", "--db", missing)
	if code != exitUsage || !strings.Contains(stderr, missing+" does not exist") {
		t.Errorf("updates ls --db %s with TGRELAY_DB set: exit %d, stderr %q; want --db to win", missing, code, stderr)
	}
}
