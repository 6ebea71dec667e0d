package broadcast

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrJournalDamaged is returned (wrapped in a [*DamageError]) by [Run] when
// the broadcast's journal is damaged beyond a torn last line: a line whose
// checksum or entry is wrong, or a journal missing next to the audience
// snapshot. Nobody can know whether the recipients those lines were about
// got the message, so the run refuses to resume until the operator chooses
// Config.RepairUncertain.
var ErrJournalDamaged = errors.New("broadcast: journal damaged")

// ErrMessageChanged is returned (wrapped) by [Run] when a resumed run's
// Config.Fingerprint differs from the one the first run kept in the
// snapshot: the recipients already sent got another message.
var ErrMessageChanged = errors.New("broadcast: the message differs from the one this broadcast started with")

// maxDamageListed bounds [Damage.Lines].
const maxDamageListed = 20

// Damage is what is wrong with a broadcast's journal. A torn last line (a
// crash in the middle of an append) is not damage: its recipient keeps the
// state of its earlier lines.
type Damage struct {
	// Missing: the journal is gone while the audience snapshot exists
	// (the first run creates the journal before the snapshot).
	Missing bool
	// Lines are the first damaged lines (at most 20), in file order.
	Lines []DamagedLine
	// Count is the number of damaged lines.
	Count int
	// Truncated: the journal's whole lines end at Length, before the
	// length it had reached (Reached, kept in journal.mark): lines were cut
	// off its end, which no crash does.
	Truncated       bool
	Length, Reached int64
	// Mark is what is wrong with journal.mark ("missing", "unreadable"),
	// or empty.
	Mark string
	// Affected counts the recipients without an outcome in the intact
	// lines: any of them may have been sent in a damaged line's place, so
	// Config.RepairUncertain records all of them uncertain.
	Affected int
}

// DamagedLine is one damaged journal line.
type DamagedLine struct {
	Line   int    `json:"line"`   // 1-based line number
	Offset int64  `json:"offset"` // byte offset of the line's start
	Reason string `json:"reason"` // "checksum mismatch", "no checksum", "not a valid entry", "empty line", …
}

// String says what is damaged, for an operator.
func (d *Damage) String() string {
	if d.Missing {
		return "the journal is missing next to the audience snapshot"
	}
	var b strings.Builder
	switch {
	case d.Truncated:
		fmt.Fprintf(&b, "the journal was cut short: its whole lines end at byte %d, but it had reached byte %d", d.Length, d.Reached)
	case d.Mark != "":
		fmt.Fprintf(&b, "the journal's length record (%s) is %s", markFile, d.Mark)
	}
	if b.Len() > 0 && len(d.Lines) > 0 {
		b.WriteString("; ")
	}
	for i, l := range d.Lines {
		if i == 3 {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "line %d (byte %d): %s", l.Line, l.Offset, l.Reason)
	}
	if shown := min(len(d.Lines), 3); d.Count > shown {
		fmt.Fprintf(&b, "; and %d more damaged line(s)", d.Count-shown)
	}
	return b.String()
}

// DamageError is the error of a run that refused a damaged journal.
type DamageError struct {
	Journal string // the journal's path
	Damage  Damage
}

// Error names the journal, the damage and the choice.
func (e *DamageError) Error() string {
	return fmt.Sprintf("broadcast: journal damaged: %s: %s; %d recipient(s) without a recorded outcome may be affected; nothing was sent; resume only with Config.RepairUncertain, which records them uncertain (never sent again)",
		e.Journal, e.Damage.String(), e.Damage.Affected)
}

// Unwrap returns [ErrJournalDamaged].
func (e *DamageError) Unwrap() error { return ErrJournalDamaged }

// Reasons of the uncertain lines a repair writes.
const (
	reasonJournalDamaged = "journal-damaged"
	reasonJournalMissing = "journal-missing"
)

// repairJournal rewrites a damaged journal: its intact lines, in order,
// then an uncertain outcome for every recipient without one. The damaged
// journal is kept beside it as journal.ndjson.damaged-<unix nanoseconds>,
// and the new one replaces it atomically (temp file, fsync, rename,
// directory fsync). res is updated to the repaired states. The caller holds
// the lock; checkLock runs before the replacement.
func repairJournal(path string, res *replayResult, checkLock func() error) error {
	dir := filepath.Dir(path)
	tmp := path + ".repair"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("broadcast: repair journal: %w", err)
	}
	defer os.Remove(tmp)
	w := bufio.NewWriter(out)
	if !res.missing {
		err = copyIntactLines(w, path, len(res.states))
	}
	reason := reasonJournalDamaged
	if res.missing {
		reason = reasonJournalMissing
	}
	var line []byte
	for i, s := range res.states {
		if err != nil {
			break
		}
		if !s.final() {
			line = appendEntry(line[:0], entry{I: i, O: string(OutcomeUncertain), R: reason})
			_, err = w.Write(line)
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("broadcast: repair journal: %w", err)
	}
	if err := checkLock(); err != nil {
		return err
	}
	// A mark of 0 is below any journal, so a crash before the new mark is
	// written never makes the repaired journal look cut short.
	if err := writeMark(filepath.Join(dir, markFile), 0, true); err != nil {
		return err
	}
	if !res.missing {
		keep := path + ".damaged-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := os.Link(path, keep); err != nil {
			return fmt.Errorf("broadcast: keep damaged journal: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("broadcast: repair journal: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("broadcast: repair journal: %w", err)
	}
	if err := writeMark(filepath.Join(dir, markFile), info.Size(), true); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	for i, s := range res.states {
		if !s.final() {
			res.states[i] = stateUncertain
		}
	}
	res.missing, res.markMissing, res.markBad, res.reached = false, false, false, info.Size()
	res.damaged, res.damagedCount, res.torn, res.intactEnd = nil, 0, false, info.Size()
	return nil
}

// copyIntactLines copies the journal's whole lines that pass parseLine.
func copyIntactLines(w io.Writer, path string, total int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 4096)
	for {
		line, _, err := readLine(br)
		if err != nil { // EOF: the rest is a torn line, dropped
			if err == io.EOF {
				return nil
			}
			return err
		}
		if _, why := parseLine(line, total); why == "" {
			if _, err := w.Write(append(line, '\n')); err != nil {
				return err
			}
		}
	}
}
