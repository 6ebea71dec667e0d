package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake"
)

// Bounds of `tgrelay updates ls` and `exhausted`.
const (
	// defaultListLimit is the page size when --limit is not given.
	defaultListLimit = 50
	// maxListLimit is the largest --limit accepted.
	maxListLimit = 1000
	// maxErrorColumn is how many characters of a row's error the table shows
	// (show and --json print it whole).
	maxErrorColumn = 60
)

const updatesHelp = `
Usage: tgrelay updates <ls|show|exhausted|ack|requeue> [flags] [ID]

Updates inspects and repairs the update store that serve writes (--db: a
SQLite file path, or a postgres:// URL). Like serve, it reads --db and
--table from TGRELAY_DB and TGRELAY_TABLE when they are not given, so it
runs with serve's environment file and a database password stays out of
the process list.

  ls [--state S] [--limit N] [--after ID]   rows in update id order
  show ID                                   one row in full, body included, and
                                            its attempts with the app's answers
  exhausted [--limit N] [--after ID]        unacknowledged exhaustions
  ack ID --attempt N --claim-id C           acknowledge one exhaustion by its
                                            exact identity (from show or exhausted)
  ack ID --yes                              acknowledge the row's current
                                            exhaustion, whatever its identity
  requeue ID                                put a failed or abandoned row back
                                            to pending, from attempt zero

ack without --attempt and --claim-id refuses unless --yes is given (exit 2,
printing the identity to pass): the exact identity is what an app fences
with, and acknowledging "whatever is there" is an operator's deliberate
choice. Either way the store applies the
acknowledgement only for that exact identity, once; a wrong identity, a row
that is not an unacknowledged exhaustion or a second ack exits 1.

Bodies and errors are masked as the dashboard masks them: anything shaped
like a bot token, and the secrets serve reads from the environment
(TGRELAY_TOKEN, TGRELAY_WEBHOOK_SECRET, TGRELAY_APP_SECRET_TOKEN,
TGRELAY_ADMIN_TOKEN) when they are set.

States: pending, processing, failed, completed, abandoned, exhausted (an
abandoned row whose exhaustion waits to be acknowledged; ls --state exhausted
lists what exhausted lists) and expired. An expired update is one with a
deadline (a callback, inline, pre-checkout or shipping query) that passed
before the app answered it: it is settled, not an exhaustion, and requeue
refuses it (it would expire again at once: its deadline counts from its
arrival). Stores keep it as abandoned, so --state expired reads the abandoned
rows in order (at most 10000 per page) and --state abandoned lists expired
ones too. --json prints JSON
instead of a table. Exit status: 0 done, 1 refused or failed, 2 usage. A
failure is told in one line; --log-level debug prints its full error too, as
serve does.
`

// stateExhausted is the name ls, --state, show and the dashboard give an
// unacknowledged exhaustion: an abandoned row whose exhaustion waits to be
// delivered or acknowledged.
const stateExhausted intake.State = "exhausted"

// statesText lists the states --state accepts.
const statesText = "pending, processing, failed, completed, abandoned, exhausted, expired"

// updatesFlags are the flags every updates subcommand accepts.
type updatesFlags struct {
	db       string
	table    string
	asJSON   bool
	state    string
	limit    int
	after    int64
	hasAfter bool
	attempt  int
	claimID  string
	yes      bool
	logLevel string
}

func runUpdates(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("updates", flag.ContinueOnError)
	var f updatesFlags
	fs.StringVar(&f.db, "db", defaultDB, "update store: a SQLite file `path` or a postgres:// URL [env TGRELAY_DB]")
	fs.StringVar(&f.table, "table", "", "update `table` name (default the store's) [env TGRELAY_TABLE]")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: debug, info, warn or error; debug prints a failure's full error")
	fs.StringVar(&f.state, "state", "", "ls: only rows in this `state`")
	fs.IntVar(&f.limit, "limit", defaultListLimit, fmt.Sprintf("ls, exhausted: at most `N` rows (1..%d)", maxListLimit))
	fs.Func("after", "ls, exhausted: rows strictly after this update `ID`", func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return errors.New("not an integer")
		}
		f.after, f.hasAfter = v, true
		return nil
	})
	fs.IntVar(&f.attempt, "attempt", 0, "ack: the exhaustion's attempt `N`")
	fs.StringVar(&f.claimID, "claim-id", "", "ack: the exhaustion's claim `id`")
	fs.BoolVar(&f.yes, "yes", false, "ack: acknowledge the row's current exhaustion without naming its identity")
	fs.Usage = commandUsage(fs, updatesHelp)
	pos, err := parseInterleaved(fs, args, stdout)
	if err != nil {
		return err
	}
	warnUnknownEnv(stderr, "updates", os.Environ())
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, name := range []string{"db", "table"} { // serve's variables, and only these
		if v := os.Getenv(envName(name)); v != "" && !given[name] {
			_ = fs.Set(name, v)
		}
	}
	hint := "Run 'tgrelay help updates' for usage."
	if len(pos) == 0 {
		return &usageError{msg: "missing subcommand (ls, show, exhausted, ack or requeue)", hint: hint}
	}
	sub, rest := pos[0], pos[1:]
	var id int64
	switch sub {
	case "ls", "exhausted":
		if len(rest) > 0 {
			return &usageError{msg: fmt.Sprintf("unexpected argument %q", rest[0]), hint: hint}
		}
		if f.limit < 1 || f.limit > maxListLimit {
			return &usageError{msg: fmt.Sprintf("--limit must be 1..%d", maxListLimit), hint: hint}
		}
	case "show", "ack", "requeue":
		if len(rest) != 1 {
			return &usageError{msg: sub + " takes exactly one update ID", hint: hint}
		}
		id, err = strconv.ParseInt(rest[0], 10, 64)
		if err != nil || id < 0 {
			return &usageError{msg: fmt.Sprintf("update ID %q is not a non-negative integer", rest[0]), hint: hint}
		}
	default:
		return &usageError{msg: fmt.Sprintf("unknown subcommand %q", sub), hint: hint}
	}
	var state intake.State
	if f.state != "" {
		state = intake.State(f.state)
		switch state {
		case intake.StatePending, intake.StateProcessing, intake.StateFailed, intake.StateCompleted, intake.StateAbandoned, intake.StateNameExpired, stateExhausted:
		default:
			return &usageError{msg: fmt.Sprintf("--state %q is not a state", f.state), hint: "States: " + statesText + "."}
		}
		if sub != "ls" {
			return &usageError{msg: "--state applies to ls only", hint: hint}
		}
	}
	if sub == "ack" {
		named := f.attempt != 0 || f.claimID != ""
		if named && (f.attempt < 1 || f.claimID == "") {
			return &usageError{msg: "ack needs both --attempt (at least 1) and --claim-id", hint: hint}
		}
		if named && f.yes {
			return &usageError{msg: "ack takes either --attempt and --claim-id, or --yes, not both", hint: hint}
		}
	}

	red := envRedactor(os.LookupEnv)
	if u, err := url.Parse(f.db); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		red.Add(pw) // nor the database's password
	}
	log, err := newLogger(stderr, "text", f.logLevel, red)
	if err != nil {
		return withHint(err, hint)
	}
	return inOneLine(runUpdatesSub(ctx, sub, id, state, f, red, stdout), log)
}

// runUpdatesSub runs the updates subcommand sub, its arguments checked.
func runUpdatesSub(ctx context.Context, sub string, id int64, state intake.State, f updatesFlags, red *botapi.Redactor, stdout io.Writer) error {
	st, err := openExistingStore(ctx, f.db, f.table)
	if err != nil {
		return err
	}
	defer st.Close()
	u := &updatesCmd{store: st, out: stdout, json: f.asJSON, red: red}
	switch sub {
	case "ls":
		q := intake.ListQuery{State: state, Limit: f.limit}
		if state == stateExhausted {
			q = intake.ListQuery{Unacknowledged: true, Limit: f.limit}
		}
		if f.hasAfter {
			q.After = &f.after
		}
		if state == intake.StateNameExpired {
			return u.listExpired(ctx, q)
		}
		return u.list(ctx, q)
	case "exhausted":
		q := intake.ListQuery{Unacknowledged: true, Limit: f.limit}
		if f.hasAfter {
			q.After = &f.after
		}
		return u.list(ctx, q)
	case "show":
		return u.show(ctx, id)
	case "ack":
		return u.ack(ctx, id, f)
	default: // requeue
		return u.requeue(ctx, id)
	}
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments (`ack 42 --attempt 3`), which the flag package alone
// stops at. It returns the positional arguments; "--" ends flag parsing.
func parseInterleaved(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	hint := fmt.Sprintf("Run 'tgrelay help %s' for usage.", fs.Name())
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, flag.ErrHelp
		}
		if err != nil {
			return nil, &usageError{msg: flagError(fs, err), hint: hint}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// The flag package consumed a "--" itself if it was the stopper.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// updatesCmd runs one updates subcommand against an open store.
type updatesCmd struct {
	store *openedStore
	out   io.Writer
	json  bool
	red   *botapi.Redactor // masks every body and error printed
}

// envRedactor returns the redactor of what the updates command prints: the
// dashboard's rule (dashboard.FormatBody), with the secrets serve would read
// from the environment registered when they are set.
func envRedactor(lookup func(string) (string, bool)) *botapi.Redactor {
	red := &botapi.Redactor{}
	for _, name := range []string{"token", "secret", "app-secret-token", "admin-token"} {
		if v, ok := lookup(envName(name)); ok {
			red.Add(v)
		}
	}
	return red
}

// rowJSON is a row as --json prints it.
type rowJSON struct {
	UpdateID       int64           `json:"update_id"`
	State          string          `json:"state"`
	Unacknowledged bool            `json:"unacknowledged,omitempty"`
	Attempts       int             `json:"attempts"`
	Crashes        int             `json:"crashes,omitempty"`
	ClaimID        string          `json:"claim_id,omitempty"`
	ReceivedAt     time.Time       `json:"received_at"`
	DueAt          *time.Time      `json:"due_at,omitempty"`
	SettledAt      *time.Time      `json:"settled_at,omitempty"`
	Error          string          `json:"error,omitempty"`
	Body           json.RawMessage `json:"body,omitempty"`
}

// toRowJSON returns r as --json prints it, its error and body masked by red.
func toRowJSON(r intake.Row, withBody bool, red *botapi.Redactor) rowJSON {
	j := rowJSON{
		UpdateID:       r.UpdateID,
		State:          r.StateName(),
		Unacknowledged: r.Unacknowledged(),
		Attempts:       r.Attempts,
		Crashes:        r.Crashes,
		ClaimID:        r.ClaimID,
		ReceivedAt:     r.ReceivedAt.UTC(),
		Error:          red.Redact(r.Error),
	}
	if !r.DueAt.IsZero() {
		t := r.DueAt.UTC()
		j.DueAt = &t
	}
	if !r.SettledAt.IsZero() {
		t := r.SettledAt.UTC()
		j.SettledAt = &t
	}
	if withBody {
		// Masking replaces text inside JSON strings with plain text, so a
		// valid body stays valid.
		masked := red.Redact(string(r.Body))
		if json.Valid([]byte(masked)) {
			j.Body = json.RawMessage(masked)
		} else {
			// A body that is not JSON is shown as a JSON string.
			b, _ := json.Marshal(masked)
			j.Body = b
		}
	}
	return j
}

func (u *updatesCmd) writeJSON(v any) error {
	enc := json.NewEncoder(u.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (u *updatesCmd) list(ctx context.Context, q intake.ListQuery) error {
	rows, err := u.store.List(ctx, q)
	if err != nil {
		return fmt.Errorf("list updates: %w", err)
	}
	var next *int64
	if len(rows) == q.Limit {
		next = &rows[len(rows)-1].UpdateID
	}
	return u.printRows(rows, next)
}

// maxExpiredScan bounds the abandoned rows one 'ls --state expired' reads.
const maxExpiredScan = 10000

// listExpired lists the expired rows (kept as abandoned) after q.After, at
// most q.Limit, reading at most maxExpiredScan abandoned rows.
func (u *updatesCmd) listExpired(ctx context.Context, q intake.ListQuery) error {
	var (
		rows    []intake.Row
		next    *int64
		scanned int
	)
	after := q.After
scan:
	for {
		want := min(500, maxExpiredScan-scanned)
		if want <= 0 {
			next = after // the scan stopped at its bound
			break
		}
		page, err := u.store.List(ctx, intake.ListQuery{State: intake.StateAbandoned, After: after, Limit: want})
		if err != nil {
			return fmt.Errorf("list updates: %w", err)
		}
		for _, r := range page {
			scanned++
			id := r.UpdateID
			after = &id
			if !r.Expired() {
				continue
			}
			if len(rows) == q.Limit {
				next = &rows[len(rows)-1].UpdateID // one more exists
				break scan
			}
			rows = append(rows, r)
		}
		if len(page) < want {
			break // the store has no more
		}
	}
	return u.printRows(rows, next)
}

// printRows prints rows as a table (or JSON), and, when next is set, where
// the next page continues.
func (u *updatesCmd) printRows(rows []intake.Row, next *int64) error {
	if u.json {
		out := make([]rowJSON, 0, len(rows))
		for _, r := range rows {
			out = append(out, toRowJSON(r, false, u.red))
		}
		return u.writeJSON(out)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(u.out, "no updates")
		return err
	}
	tw := tabwriter.NewWriter(u.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "UPDATE_ID\tSTATE\tATTEMPT\tCLAIM_ID\tRECEIVED\tDUE\tERROR")
	for _, r := range rows {
		state := r.StateName()
		if r.Unacknowledged() {
			state = string(stateExhausted)
		}
		claim := r.ClaimID
		if claim == "" {
			claim = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", r.UpdateID, state, r.Attempts, claim,
			fmtTime(r.ReceivedAt), fmtTime(r.DueAt), oneLine(u.red.Redact(r.Error), maxErrorColumn))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != nil {
		_, err := fmt.Fprintf(u.out, "more may follow: --after %d\n", *next)
		return err
	}
	return nil
}

func (u *updatesCmd) get(ctx context.Context, id int64) (intake.Row, error) {
	r, ok, err := u.store.Get(ctx, id)
	if err != nil {
		return intake.Row{}, fmt.Errorf("get update %d: %w", id, err)
	}
	if !ok {
		return intake.Row{}, fmt.Errorf("update %d is not in the store", id)
	}
	return r, nil
}

func (u *updatesCmd) show(ctx context.Context, id int64) error {
	r, err := u.get(ctx, id)
	if err != nil {
		return err
	}
	calls, err := u.journal(ctx, id)
	if err != nil {
		return err
	}
	steps, err := u.timeline(ctx, id) // updates_attempts.go
	if err != nil {
		return err
	}
	if u.json {
		return u.writeJSON(struct {
			rowJSON
			History []attemptJSON `json:"history"`
			Calls   []callJSON    `json:"calls"`
		}{toRowJSON(r, true, u.red), u.toAttemptsJSON(steps), toCallsJSON(calls)})
	}
	state := r.StateName()
	switch {
	case r.Unacknowledged():
		state = string(stateExhausted) + " (abandoned; an unacknowledged exhaustion)"
	case r.Expired():
		state += " (its deadline passed before the app answered; not an exhaustion)"
	}
	tw := tabwriter.NewWriter(u.out, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "update_id:\t%d\n", r.UpdateID)
	fmt.Fprintf(tw, "state:\t%s\n", state)
	fmt.Fprintf(tw, "attempt:\t%d\n", r.Attempts)
	if r.Crashes > 0 {
		fmt.Fprintf(tw, "crashes:\t%d (attempts that ended with their process)\n", r.Crashes)
	}
	fmt.Fprintf(tw, "claim_id:\t%s\n", orDash(r.ClaimID))
	fmt.Fprintf(tw, "received:\t%s\n", fmtTime(r.ReceivedAt))
	fmt.Fprintf(tw, "due:\t%s\n", fmtTime(r.DueAt))
	fmt.Fprintf(tw, "settled:\t%s\n", fmtTime(r.SettledAt))
	fmt.Fprintf(tw, "error:\t%s\n", orDash(u.red.Redact(r.Error)))
	if err := tw.Flush(); err != nil {
		return err
	}
	if b := dashboard.FormatBody(r.Body, 0, u.red); b.Valid {
		_, err = fmt.Fprintf(u.out, "body:\n%s\n", b.Text)
	} else {
		_, err = fmt.Fprintf(u.out, "body (not JSON):\n%q\n", b.Text)
	}
	if err != nil {
		return err
	}
	if err := u.printTimeline(steps); err != nil {
		return err
	}
	return u.printCalls(calls)
}

// ackResult is what ack prints with --json.
type ackResult struct {
	UpdateID     int64  `json:"update_id"`
	Attempt      int    `json:"attempt"`
	ClaimID      string `json:"claim_id"`
	Acknowledged bool   `json:"acknowledged"`
}

func (u *updatesCmd) ack(ctx context.Context, id int64, f updatesFlags) error {
	ident := intake.Identity{UpdateID: id, Attempt: f.attempt, ClaimID: f.claimID}
	if f.claimID == "" {
		r, err := u.get(ctx, id)
		if err != nil {
			return err
		}
		if !r.Unacknowledged() {
			return fmt.Errorf("update %d is not an unacknowledged exhaustion (state %s)", id, r.State)
		}
		ident.Attempt, ident.ClaimID = r.Attempts, r.ClaimID
		if !f.yes {
			return &usageError{
				msg:  fmt.Sprintf("ack names no identity; update %d is exhausted at attempt %d, claim id %s", id, r.Attempts, r.ClaimID),
				hint: fmt.Sprintf("Run 'tgrelay updates ack %d --attempt %d --claim-id %s', or add --yes to acknowledge it as it is.", id, r.Attempts, r.ClaimID),
			}
		}
	}
	ok, err := u.store.store.AcknowledgeExhaustion(ctx, ident, time.Now())
	if err != nil {
		return fmt.Errorf("acknowledge update %d: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("update %d: no unacknowledged exhaustion with attempt %d and claim id %s (wrong identity, already acknowledged, or requeued)", id, ident.Attempt, ident.ClaimID)
	}
	if u.json {
		return u.writeJSON(ackResult{UpdateID: id, Attempt: ident.Attempt, ClaimID: ident.ClaimID, Acknowledged: true})
	}
	_, err = fmt.Fprintf(u.out, "acknowledged update %d (attempt %d, claim id %s)\n", id, ident.Attempt, ident.ClaimID)
	return err
}

func (u *updatesCmd) requeue(ctx context.Context, id int64) error {
	if r, found, err := u.store.Get(ctx, id); err == nil && found && r.Expired() {
		return fmt.Errorf("update %d expired; requeued, it would expire again at once, since its deadline counts from its arrival", id)
	}
	ok, err := u.store.Requeue(ctx, id, time.Now())
	if err != nil {
		return fmt.Errorf("requeue update %d: %w", id, err)
	}
	if !ok {
		r, found, gerr := u.store.Get(ctx, id)
		switch {
		case gerr != nil:
			return fmt.Errorf("update %d was not requeued", id)
		case !found:
			return fmt.Errorf("update %d is not in the store", id)
		default:
			return fmt.Errorf("update %d is %s; only failed or abandoned rows can be requeued", id, r.State)
		}
	}
	if u.json {
		return u.writeJSON(map[string]any{"update_id": id, "requeued": true})
	}
	_, err = fmt.Fprintf(u.out, "requeued update %d: pending, attempt 0\n", id)
	return err
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine flattens s to one line of at most n characters.
func oneLine(s string, n int) string {
	if s == "" {
		return "-"
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
