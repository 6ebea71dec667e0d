package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/broadcast"
	"github.com/tgrelay/tgrelay/tghtml"
)

// Exit codes of `tgrelay broadcast run`, besides run's exitOK (finished, or
// a dry run), exitError (1: an error, such as another runner holding the
// lock) and exitUsage (2: a bad flag, message or audience file; nothing was
// written or sent).
const (
	// exitBroadcastHalted: a failure halted the broadcast (a refused message,
	// a provider wait above --max-retry-delay, or an outcome nobody can know).
	// Fix the cause and run the same --name again.
	exitBroadcastHalted = 3
	// exitBroadcastStopped: SIGINT or SIGTERM stopped the broadcast after the
	// sends in flight were recorded. Run the same --name again to resume.
	exitBroadcastStopped = 4
	// exitBroadcastDamaged: the journal is damaged (or missing); nothing
	// was sent. Check `broadcast status`, then run again with
	// --repair-uncertain to record the affected recipients uncertain.
	exitBroadcastDamaged = 5
)

// Bounds of the broadcast command's inputs.
const (
	// maxAudienceFileBytes bounds the audience file read by --audience.
	maxAudienceFileBytes = 64 << 20
	// maxAudienceLineBytes bounds one line of the audience file, comment
	// included.
	maxAudienceLineBytes = 1024
	// maxAudienceProblems is how many invalid lines are listed; the rest are
	// counted.
	maxAudienceProblems = 20
	// maxBroadcastTextBytes bounds --text and --text-file (Telegram's limit
	// is 4096 UTF-16 units of visible text; markup may add more).
	maxBroadcastTextBytes = 64 << 10
	// defaultBroadcastProgressEvery is the default of --progress-every.
	defaultBroadcastProgressEvery = 10 * time.Second
	// maxBroadcastProgressEvery bounds --progress-every.
	maxBroadcastProgressEvery = time.Hour
	// broadcastBarThrottle is the least time between two renders of the
	// progress bar.
	broadcastBarThrottle = 100 * time.Millisecond
)

const broadcastHelp = `
Usage: tgrelay broadcast run --name N --audience FILE (--text T [--html] | --text-file F [--html] |
                             --copy-from CHAT --message-id M) [--state-dir DIR] [--rate 25]
                             [--concurrency 8] [--dry-run] [--repair-uncertain]
                             [--token T] [--api-root URL]
       tgrelay broadcast status --name N [--state-dir DIR] [--list WHICH] [--json]

Broadcast sends one message to many chats at Telegram's rate limit. It is
resumable by name after any crash and never sends a chat the message twice:
every recipient gets an intent line in a journal before its send and an
outcome line after (delivered, unreachable, failed or uncertain). A recipient
whose outcome cannot be known (the request may have arrived) is recorded
uncertain and is never sent again automatically.

run starts a broadcast, or resumes it when --name exists in --state-dir. The
audience file (--audience) holds one chat id (-1001234) or @channelusername
per line; blank lines and # comments are ignored. It is read and checked
before anything is written: an invalid line is refused with its line number.
The first run keeps a snapshot of the audience, and later runs of the same
name use it (--audience may then be left out; a changed file is ignored).
The message is a text (--text, or --text-file for a long one; with --html it
must be Telegram HTML, checked before the run starts) or a copy of a prepared
message with its media (--copy-from CHAT --message-id M, copyMessage).
The first run keeps a hash of the message in the snapshot; resuming with
another message is refused.

Every journal line carries a checksum. A torn last line (a crash in the
middle of a write) is expected and tolerated. Any other damage (a line that
fails its checksum, a journal cut short or deleted) makes run refuse to
resume (exit 5) and status report it, because nobody can know which
recipients those lines were about. --repair-uncertain is the operator's way
on: every recipient without a recorded outcome in the intact lines is
recorded uncertain, never sent again; the damaged journal is kept beside
the repaired one (journal.ndjson.damaged-<time>).

On a terminal run shows a progress bar with the rate and the ETA; otherwise
it writes a progress line to stderr every --progress-every. It ends with the
counts on stdout.

status prints whether a runner holds the broadcast (running: yes/no) and
the counts from its journal: delivered, unreachable, failed, uncertain,
pending and total. With --list uncertain, failed, unreachable or all it also
names those recipients, one per line in audience order (all adds the chats
that moved to a new id); --json includes them as arrays. Uncertain recipients
may or may not have the message: check them by hand. status takes no lock and
writes nothing, so it may run while the broadcast runs; while it runs, a
recipient whose send is in flight is counted and listed as uncertain.

Exit codes of run:

  0  finished (every recipient has an outcome), or a dry run
  1  an error (another runner holds the broadcast, an I/O failure, ...)
  2  a usage error: a bad flag, message or audience file; nothing was written
  3  halted: a refused message, a wait above --max-retry-delay, or an
     uncertain outcome; fix the cause, then run the same --name again
  4  stopped by SIGINT or SIGTERM (no new send starts; the sends in flight
     finish, within --send-timeout, and are recorded); run the same --name
     again to resume
  5  the journal is damaged (a line fails its checksum, it was cut short,
     or it is missing); nothing was sent; see status, then run again with
     --repair-uncertain

The token comes from --token or, better (it stays out of the process list),
the TGRELAY_TOKEN environment variable; it never appears in the output.
--state-dir defaults to $XDG_STATE_HOME/tgrelay/broadcast, or
~/.local/state/tgrelay/broadcast.
On one CPU, run runs Go code on two Ps (GOMAXPROCS=2) unless GOMAXPROCS is
set: with one, nothing runs while a journal fsync waits for the disk.
`

// runBroadcast is `tgrelay broadcast run|status`.
func runBroadcast(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	hint := "Run 'tgrelay help broadcast' for usage."
	if len(args) == 0 {
		return &usageError{msg: "missing subcommand: run or status", hint: hint}
	}
	switch args[0] {
	case "run":
		return broadcastRun(ctx, args[1:], stdout, stderr)
	case "status":
		return broadcastStatus(ctx, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		printBroadcastHelp(stdout)
		return flag.ErrHelp
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q (want run or status)", args[0]), hint: hint}
}

// printBroadcastHelp writes the command's description and the flags of
// both subcommands.
func printBroadcastHelp(w io.Writer) {
	fmt.Fprint(w, strings.TrimLeft(broadcastHelp, "\n"))
	rfs, _ := newBroadcastRunFlags()
	rfs.SetOutput(w)
	fmt.Fprint(w, "\nFlags of run:\n\n")
	rfs.PrintDefaults()
	sfs, _ := newBroadcastStatusFlags()
	sfs.SetOutput(w)
	fmt.Fprint(w, "\nFlags of status:\n\n")
	sfs.PrintDefaults()
}

// broadcastRunOpts are the flags of `tgrelay broadcast run`.
type broadcastRunOpts struct {
	bot           botFlags
	name          string
	stateDir      string
	audience      string
	text          string
	textFile      string
	html          bool
	copyFrom      string
	messageID     int64
	rate          float64
	concurrency   int
	maxAttempts   int
	maxRetryDelay time.Duration
	sendTimeout   time.Duration
	dryRun        bool
	progress      string
	progressEvery time.Duration
	repair        bool
}

func newBroadcastRunFlags() (*flag.FlagSet, *broadcastRunOpts) {
	fs := flag.NewFlagSet("broadcast", flag.ContinueOnError)
	o := &broadcastRunOpts{}
	fs.StringVar(&o.name, "name", "", "broadcast `name`: 1-128 of letters, digits, '.', '_', '-'; the same name resumes it (required)")
	fs.StringVar(&o.stateDir, "state-dir", "", "`directory` holding the broadcasts' snapshots, journals and locks")
	fs.StringVar(&o.audience, "audience", "", "`file` with one chat id or @channelusername per line (required on the first run)")
	fs.StringVar(&o.text, "text", "", "message `text`")
	fs.StringVar(&o.textFile, "text-file", "", "read the message text from `file` (one trailing newline is dropped)")
	fs.BoolVar(&o.html, "html", false, "send the text with parse_mode HTML (checked before the run starts)")
	fs.StringVar(&o.copyFrom, "copy-from", "", "copy a prepared message from this `chat` id (with --message-id)")
	fs.Int64Var(&o.messageID, "message-id", 0, "the prepared message's `id` in --copy-from")
	fs.Float64Var(&o.rate, "rate", broadcast.DefaultRate, fmt.Sprintf("sends started per `second`, retries included (%v..%v)", broadcast.MinRate, broadcast.MaxRate))
	fs.IntVar(&o.concurrency, "concurrency", broadcast.DefaultConcurrency, fmt.Sprintf("most sends in flight at once (1..%d)", broadcast.MaxConcurrency))
	fs.IntVar(&o.maxAttempts, "max-attempts", broadcast.DefaultMaxAttempts, fmt.Sprintf("tries of one recipient on retryable failures (1..%d)", broadcast.MaxMaxAttempts))
	fs.DurationVar(&o.maxRetryDelay, "max-retry-delay", broadcast.DefaultMaxRetryDelay, "longest Telegram retry_after honoured; a longer one halts the broadcast")
	fs.DurationVar(&o.sendTimeout, "send-timeout", broadcast.DefaultSendTimeout, "bound of each send; a send that times out is recorded uncertain")
	fs.BoolVar(&o.dryRun, "dry-run", false, "check the inputs and print the counts; send nothing, write nothing")
	fs.StringVar(&o.progress, "progress", "auto", "`mode`: bar, log (a line every --progress-every), none, or auto (bar on a terminal, else log)")
	fs.DurationVar(&o.progressEvery, "progress-every", defaultBroadcastProgressEvery, "interval of the progress lines in log mode")
	fs.BoolVar(&o.repair, "repair-uncertain", false, "resume a broadcast whose journal is damaged: record every recipient without a recorded outcome uncertain (never sent again)")
	o.bot.register(fs)
	return fs, o
}

func newBroadcastStatusFlags() (*flag.FlagSet, *broadcastStatusOpts) {
	fs := flag.NewFlagSet("broadcast", flag.ContinueOnError)
	o := &broadcastStatusOpts{}
	fs.StringVar(&o.name, "name", "", "broadcast `name` (required)")
	fs.StringVar(&o.stateDir, "state-dir", "", "`directory` holding the broadcasts (as given to run)")
	fs.BoolVar(&o.json, "json", false, "print the counts as one JSON object")
	fs.StringVar(&o.list, "list", "", "also name the recipients `which`: uncertain, failed, unreachable or all")
	return fs, o
}

// The values of `status --list`.
const (
	statusListUncertain   = "uncertain"
	statusListFailed      = "failed"
	statusListUnreachable = "unreachable"
	statusListAll         = "all"
)

// broadcastStatusOpts are the flags of `tgrelay broadcast status`.
type broadcastStatusOpts struct {
	name     string
	stateDir string
	json     bool
	list     string // "" or one of the list* constants
}

// broadcastHint is the hint of the broadcast command's usage errors.
const broadcastHint = "Run 'tgrelay help broadcast' for usage."

func broadcastRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, o := newBroadcastRunFlags()
	fs.Usage = func() { printBroadcastHelp(fs.Output()) }
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	warnUnknownEnv(stderr, "broadcast", os.Environ())
	// Every send is journaled and fsynced: on one CPU, one P would fall
	// short of --rate (see tuneProcs).
	if was := tuneProcs(os.LookupEnv); was > 0 {
		fmt.Fprintf(stderr, "broadcast: running Go code on %d Ps, not %d, so that a journal commit waiting for the disk does not hold up the sends (set GOMAXPROCS to choose)\n", minGoProcs, was)
	}
	usage := func(format string, a ...any) error {
		return &usageError{msg: fmt.Sprintf(format, a...), hint: broadcastHint}
	}
	if err := checkBroadcastName(o.name); err != nil {
		return usage("%v", err)
	}
	switch {
	case math.IsNaN(o.rate) || o.rate < broadcast.MinRate || o.rate > broadcast.MaxRate:
		return usage("--rate must be in %v..%v, got %v", broadcast.MinRate, broadcast.MaxRate, o.rate)
	case o.concurrency < 1 || o.concurrency > broadcast.MaxConcurrency:
		return usage("--concurrency must be in 1..%d, got %d", broadcast.MaxConcurrency, o.concurrency)
	case o.maxAttempts < 1 || o.maxAttempts > broadcast.MaxMaxAttempts:
		return usage("--max-attempts must be in 1..%d, got %d", broadcast.MaxMaxAttempts, o.maxAttempts)
	case o.maxRetryDelay <= 0 || o.maxRetryDelay > broadcast.MaxPause:
		return usage("--max-retry-delay must be in (0, %v], got %v", broadcast.MaxPause, o.maxRetryDelay)
	case o.sendTimeout <= 0 || o.sendTimeout > broadcast.MaxSendTimeout:
		return usage("--send-timeout must be in (0, %v], got %v", broadcast.MaxSendTimeout, o.sendTimeout)
	case o.progressEvery <= 0 || o.progressEvery > maxBroadcastProgressEvery:
		return usage("--progress-every must be in (0, %v], got %v", maxBroadcastProgressEvery, o.progressEvery)
	}
	mode, err := progressMode(o.progress, stderr)
	if err != nil {
		return usage("%v", err)
	}
	msg, err := o.message()
	if err != nil {
		return usage("%v", err)
	}
	stateDir, err := resolveStateDir(o.stateDir)
	if err != nil {
		return usage("%v", err)
	}

	// The audience is read and checked before anything is written.
	exists, err := broadcastExists(stateDir, o.name)
	if err != nil {
		return err
	}
	var audience []broadcast.Recipient
	if o.audience != "" {
		audience, err = readAudienceFile(o.audience)
		if err != nil {
			var ae *audienceError
			if errors.As(err, &ae) {
				return &usageError{msg: ae.Error(), hint: "Nothing was sent or written; fix the audience file and run again."}
			}
			return err
		}
		if exists {
			fmt.Fprintf(stderr, "broadcast %s exists: its audience snapshot is used, --audience is ignored\n", o.name)
		}
	} else if !exists {
		return usage("--audience is required to start broadcast %q (no such broadcast in %s)", o.name, stateDir)
	}

	cfg := broadcast.Config{
		Name:          o.name,
		Dir:           stateDir,
		Rate:          o.rate,
		Concurrency:   o.concurrency,
		MaxAttempts:   o.maxAttempts,
		MaxRetryDelay: o.maxRetryDelay,
		SendTimeout:   o.sendTimeout,
		DryRun:        o.dryRun,
		// The message decides what recipients receive; resuming with
		// another is refused.
		Fingerprint:     msg.Fingerprint(),
		RepairUncertain: o.repair,
	}
	if audience != nil {
		cfg.AudienceFunc = func(context.Context) ([]broadcast.Recipient, error) { return audience, nil }
	}
	redact := botapi.Redact
	if !o.dryRun {
		client, err := o.bot.client("broadcast")
		if err != nil {
			return err
		}
		redact = client.Redact
		// A wrong token or --api-root is found before anything is written.
		if _, err := client.Call(ctx, "getMe", nil); err != nil {
			return fmt.Errorf("checking the bot with getMe (nothing was sent or written): %w", err)
		}
		send, err := broadcast.Sender(client, msg)
		if err != nil {
			return usage("%v", err)
		}
		cfg.SendFunc = send
		p := newBroadcastProgress(mode, stderr, o.name, o.rate, time.Now)
		cfg.ProgressFunc = p.report
		cfg.ProgressInterval = o.progressEvery
		if mode == progressBar {
			cfg.ProgressInterval = -1 // every recipient; the bar throttles itself
		}
	}

	rep, err := broadcast.Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, broadcast.ErrLocked) {
			return fmt.Errorf("broadcast %s is already running (another process holds its lock)", o.name)
		}
		if errors.Is(err, broadcast.ErrMessageChanged) {
			return &usageError{msg: fmt.Sprintf("broadcast %s started with another message: give the same --text, --text-file or --copy-from/--message-id (and --html) to resume it, or start a new --name", o.name),
				hint: "Nothing was sent or written."}
		}
		var de *broadcast.DamageError
		if errors.As(err, &de) {
			return &exitCodeError{code: exitBroadcastDamaged, msg: fmt.Sprintf(
				"broadcast %s: its journal %s is damaged: %s. Nothing was sent. %d recipient(s) without a recorded outcome may or may not have the message; run again with --repair-uncertain to record them uncertain (they are never sent again) and continue; 'tgrelay broadcast status --name %s' shows the damage",
				o.name, de.Journal, de.Damage.String(), de.Damage.Affected, o.name)}
		}
		return errors.New(redact(err.Error()))
	}
	writeBroadcastReport(stdout, rep, true)
	switch rep.State {
	case broadcast.StateHalted:
		return &exitCodeError{code: exitBroadcastHalted, msg: redact(haltMessage(rep))}
	case broadcast.StateStopped:
		return &exitCodeError{code: exitBroadcastStopped,
			msg: fmt.Sprintf("stopped with %d pending; run the same --name again to resume", rep.Pending)}
	}
	return nil
}

// haltMessage says why a broadcast halted and what to do.
func haltMessage(rep *broadcast.Report) string {
	if rep.Halt == nil {
		return "halted; run the same --name again once the cause is fixed"
	}
	why := string(rep.Halt.Kind)
	if rep.Halt.Reason != "" {
		why += ": " + rep.Halt.Reason
	}
	switch {
	case rep.Halt.Kind == broadcast.KindAmbiguous:
		return fmt.Sprintf("halted (%s); a recipient may or may not have the message and is recorded uncertain, never resent; run the same --name again to continue with the others", why)
	case rep.Halt.Kind == broadcast.KindPauseAll:
		return fmt.Sprintf("halted (%s, wait %v above --max-retry-delay); the recipient stays pending; run the same --name again later", why, rep.Halt.Pause)
	}
	return fmt.Sprintf("halted (%s); the recipient stays pending; fix the cause, then run the same --name again", why)
}

// message returns the message the flags describe, checked as Telegram would
// check it (HTML markup, visible length).
func (o *broadcastRunOpts) message() (broadcast.Message, error) {
	n := 0
	for _, set := range []bool{o.text != "", o.textFile != "", o.copyFrom != "" || o.messageID != 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		return broadcast.Message{}, errors.New("give exactly one of --text, --text-file, or --copy-from with --message-id")
	}
	if o.copyFrom != "" || o.messageID != 0 {
		if o.html {
			return broadcast.Message{}, errors.New("--html applies to a text, not to a copy")
		}
		from, err := strconv.ParseInt(o.copyFrom, 10, 64)
		if err != nil || from == 0 {
			return broadcast.Message{}, fmt.Errorf("--copy-from %q is not a chat id", o.copyFrom)
		}
		if o.messageID <= 0 {
			return broadcast.Message{}, errors.New("--copy-from needs --message-id (a positive message id)")
		}
		return broadcast.Message{FromChatID: from, MessageID: o.messageID}, nil
	}
	text, src := o.text, "--text"
	if o.textFile != "" {
		b, err := readBounded(o.textFile, maxBroadcastTextBytes)
		if err != nil {
			return broadcast.Message{}, fmt.Errorf("--text-file: %w", err)
		}
		text, src = string(b), "--text-file"
		text = strings.TrimSuffix(strings.TrimSuffix(text, "\n"), "\r")
	}
	if len(text) > maxBroadcastTextBytes {
		return broadcast.Message{}, fmt.Errorf("%s is longer than %d bytes", src, maxBroadcastTextBytes)
	}
	m := broadcast.Message{Text: text}
	visible := text
	if o.html {
		m.ParseMode = "HTML"
		if p := tghtml.Check(text); p != nil {
			return broadcast.Message{}, fmt.Errorf("%s: Telegram would refuse this HTML: %v", src, p)
		}
		visible = tghtml.Text(text)
	}
	if l := tghtml.Len(visible); l == 0 || l > tghtml.TextLimit {
		return broadcast.Message{}, fmt.Errorf("%s: the visible text is %d UTF-16 units; Telegram takes 1..%d", src, l, tghtml.TextLimit)
	}
	return m, nil
}

// checkBroadcastName reports whether name is a valid broadcast name, as
// package broadcast requires it, naming the flag.
func checkBroadcastName(name string) error {
	if name == "" {
		return errors.New("--name is required")
	}
	if !broadcast.ValidName(name) {
		return fmt.Errorf("--name %.140q: want 1-%d of letters, digits, '.', '_', '-', starting with a letter or digit", name, broadcast.MaxNameLen)
	}
	return nil
}

// resolveStateDir returns dir, or the default state directory when dir is
// empty.
func resolveStateDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "tgrelay", "broadcast"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("no --state-dir, and no home directory to default to")
	}
	return filepath.Join(home, ".local", "state", "tgrelay", "broadcast"), nil
}

// broadcastSnapshot is the audience snapshot's file name inside
// <state-dir>/<name>/, as package broadcast documents it.
const broadcastSnapshot = "audience.json"

// broadcastExists reports whether the broadcast has its audience snapshot,
// that is, whether a run of it has started.
func broadcastExists(stateDir, name string) (bool, error) {
	_, err := os.Stat(filepath.Join(stateDir, name, broadcastSnapshot))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("broadcast %s: %w", name, err)
}

func broadcastStatus(_ context.Context, args []string, stdout io.Writer) error {
	fs, o := newBroadcastStatusFlags()
	fs.Usage = func() { printBroadcastHelp(fs.Output()) }
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := checkBroadcastName(o.name); err != nil {
		return &usageError{msg: err.Error(), hint: broadcastHint}
	}
	switch o.list {
	case "", statusListUncertain, statusListFailed, statusListUnreachable, statusListAll:
	default:
		return &usageError{msg: fmt.Sprintf("--list %q: want uncertain, failed, unreachable or all", o.list), hint: broadcastHint}
	}
	stateDir, err := resolveStateDir(o.stateDir)
	if err != nil {
		return &usageError{msg: err.Error(), hint: broadcastHint}
	}
	// Inspect reads the snapshot and replays the journal without the lock
	// and without writing; a stale intent counts as uncertain, as the next
	// run will record it.
	st, err := broadcast.Inspect(stateDir, o.name)
	if errors.Is(err, broadcast.ErrNotFound) {
		return fmt.Errorf("no broadcast %s in %s", o.name, stateDir)
	}
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(stdout).Encode(newBroadcastStatusJSON(st, o.list))
	}
	fmt.Fprintf(stdout, "running: %s\n", yesNo(st.Running))
	if d := st.Damage; d != nil {
		fmt.Fprintf(stdout, "DAMAGED: %s\n  %d recipient(s) without a recorded outcome may be affected; run refuses to resume until\n  --repair-uncertain records them uncertain (never sent again). The counts below come from the intact lines.\n",
			d.String(), d.Affected)
	}
	writeBroadcastReport(stdout, &st.Report, false)
	writeBroadcastLists(stdout, st, o.list)
	return nil
}

// yesNo spells a boolean for people.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// recipientList is one named list of recipients of a status.
type recipientList struct {
	name string
	rs   []broadcast.Recipient
}

// statusLists returns the lists of st that `--list which` selects, in a
// fixed order; none for "".
func statusLists(st *broadcast.Status, which string) []recipientList {
	var out []recipientList
	for _, l := range []recipientList{{statusListUncertain, st.Uncertain}, {statusListFailed, st.Failed}, {statusListUnreachable, st.Unreachable}} {
		if which == statusListAll || which == l.name {
			out = append(out, l)
		}
	}
	return out
}

// writeBroadcastLists prints the recipients `--list which` selects: a
// heading per list, then one recipient per line; "all" adds the migrated
// chats as "old -> new (outcome)".
func writeBroadcastLists(w io.Writer, st *broadcast.Status, which string) {
	for _, l := range statusLists(st, which) {
		fmt.Fprintf(w, "%s recipients (%d):\n", l.name, len(l.rs))
		for _, r := range l.rs {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
	if which == statusListAll {
		fmt.Fprintf(w, "migrated recipients (%d):\n", len(st.Migrated))
		for _, m := range st.Migrated {
			fmt.Fprintf(w, "  %s -> %d (%s)\n", m.From, m.To, m.Outcome)
		}
	}
}

// broadcastStatusJSON is what `status --json` prints: the counts, whether a
// runner holds the broadcast, and the lists --list selects (absent when not
// selected; an empty array when selected and empty).
type broadcastStatusJSON struct {
	broadcastCounts
	Running     bool                   `json:"running"`
	Damage      *damageJSON            `json:"damage,omitempty"`
	Uncertain   *[]broadcast.Recipient `json:"uncertain_recipients,omitempty"`
	Failed      *[]broadcast.Recipient `json:"failed_recipients,omitempty"`
	Unreachable *[]broadcast.Recipient `json:"unreachable_recipients,omitempty"`
	Migrated    *[]migratedJSON        `json:"migrated_recipients,omitempty"`
}

// damageJSON is the journal's damage in `status --json`.
type damageJSON struct {
	Description string                  `json:"description"`
	Missing     bool                    `json:"journal_missing"`
	Truncated   bool                    `json:"truncated"`
	Mark        string                  `json:"mark_problem,omitempty"`
	Count       int                     `json:"damaged_lines"`
	Lines       []broadcast.DamagedLine `json:"first_damaged_lines"`
	Affected    int                     `json:"affected_recipients"`
}

// migratedJSON is one migrated recipient in `status --json`.
type migratedJSON struct {
	From    broadcast.Recipient `json:"from"`
	To      int64               `json:"to"`
	Outcome string              `json:"outcome"`
}

func newBroadcastStatusJSON(st *broadcast.Status, which string) broadcastStatusJSON {
	out := broadcastStatusJSON{broadcastCounts: newBroadcastCounts(&st.Report), Running: st.Running}
	if d := st.Damage; d != nil {
		lines := d.Lines
		if lines == nil {
			lines = []broadcast.DamagedLine{}
		}
		out.Damage = &damageJSON{Description: d.String(), Missing: d.Missing, Truncated: d.Truncated, Mark: d.Mark,
			Count: d.Count, Lines: lines, Affected: d.Affected}
	}
	for _, l := range statusLists(st, which) {
		rs := l.rs
		if rs == nil {
			rs = []broadcast.Recipient{}
		}
		switch l.name {
		case statusListUncertain:
			out.Uncertain = &rs
		case statusListFailed:
			out.Failed = &rs
		case statusListUnreachable:
			out.Unreachable = &rs
		}
	}
	if which == statusListAll {
		ms := make([]migratedJSON, 0, len(st.Migrated))
		for _, m := range st.Migrated {
			ms = append(ms, migratedJSON{From: m.From, To: m.To, Outcome: string(m.Outcome)})
		}
		out.Migrated = &ms
	}
	return out
}

// broadcastCounts is a report as `status --json` prints it.
type broadcastCounts struct {
	Name        string `json:"name"`
	State       string `json:"state"`
	Total       int    `json:"total"`
	Delivered   int    `json:"delivered"`
	Unreachable int    `json:"unreachable"`
	Failed      int    `json:"failed"`
	Uncertain   int    `json:"uncertain"`
	Pending     int    `json:"pending"`
	Migrated    int    `json:"migrated"`
}

func newBroadcastCounts(rep *broadcast.Report) broadcastCounts {
	return broadcastCounts{Name: rep.Name, State: reportState(rep), Total: rep.Total,
		Delivered: rep.Delivered, Unreachable: rep.Unreachable, Failed: rep.Failed,
		Uncertain: rep.Uncertain, Pending: rep.Pending, Migrated: rep.Migrated}
}

// reportState names where a broadcast stands. A dry run (as status reads
// it) is "finished" when nothing is pending, else "incomplete".
func reportState(rep *broadcast.Report) string {
	if rep.State != broadcast.StateDryRun {
		return string(rep.State)
	}
	if rep.Pending == 0 {
		return "finished"
	}
	return "incomplete"
}

// writeBroadcastReport prints the counts of a report; fromRun marks the
// report of `run` (where a dry run says so), not of `status`.
func writeBroadcastReport(w io.Writer, rep *broadcast.Report, fromRun bool) {
	state := reportState(rep)
	if fromRun && rep.State == broadcast.StateDryRun {
		state = "dry run (nothing sent, nothing written); " + state
	}
	fmt.Fprintf(w, "broadcast %s: %s\n", rep.Name, state)
	for _, row := range []struct {
		k string
		v int
	}{
		{"total", rep.Total}, {"delivered", rep.Delivered}, {"unreachable", rep.Unreachable},
		{"failed", rep.Failed}, {"uncertain", rep.Uncertain}, {"pending", rep.Pending},
	} {
		fmt.Fprintf(w, "  %-12s %d\n", row.k, row.v)
	}
	if rep.Migrated > 0 {
		fmt.Fprintf(w, "  %-12s %d\n", "migrated", rep.Migrated)
	}
	if rep.Uncertain > 0 {
		fmt.Fprintf(w, "%d uncertain recipient(s) may or may not have the message; they are never resent automatically.\n", rep.Uncertain)
	}
}

// readBounded reads the file at path, failing when it is larger than limit
// bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
