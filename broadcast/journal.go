package broadcast

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Outcome is the final state of one recipient in a broadcast.
type Outcome string

// The outcomes of a recipient. A recipient without one is pending.
const (
	// OutcomeDelivered: Telegram accepted the message.
	OutcomeDelivered Outcome = "delivered"
	// OutcomeUnreachable: the recipient blocked the bot, is gone or never started
	// it. Never sent again.
	OutcomeUnreachable Outcome = "unreachable"
	// OutcomeFailed: refused for a reason about neither the recipient nor
	// the message, or retries ran out. Never sent again.
	OutcomeFailed Outcome = "failed"
	// OutcomeUncertain: the message may or may not have arrived (an ambiguous
	// failure, or a crash between intent and outcome). Never sent again
	// automatically.
	OutcomeUncertain Outcome = "uncertain"
)

// Journal line markers besides the outcomes.
const (
	markSending  = "sending"  // intent, written before a recipient's first send
	markReleased = "released" // back to pending (halt or stop before any outcome)
)

// maxJournalLine bounds one journal line; longer lines are skipped on replay.
const maxJournalLine = 256

// entry is one journal line:
//
//	{"i":N,"s":"sending"} | {"i":N,"s":"released"} | {"i":N,"o":"<outcome>","r":"<reason>","m":<new chat id>}
type entry struct {
	I int    `json:"i"`
	S string `json:"s,omitempty"`
	O string `json:"o,omitempty"`
	R string `json:"r,omitempty"`
	M int64  `json:"m,omitempty"`
}

// state of a recipient during replay.
type state uint8

const (
	statePending state = iota
	stateSending
	stateDelivered
	stateUnreachable
	stateFailed
	stateUncertain
)

func (s state) final() bool { return s >= stateDelivered }

var outcomeState = map[string]state{
	string(OutcomeDelivered): stateDelivered, string(OutcomeUnreachable): stateUnreachable,
	string(OutcomeFailed): stateFailed, string(OutcomeUncertain): stateUncertain,
}

// parseEntry reads one journal line strictly: exactly the keys of one line
// form, an index in [0, total), a known marker or outcome, a reason of at
// most MaxReasonLen bytes. Anything else (torn, unknown keys, repeats) is
// refused.
func parseEntry(line []byte, total int) (entry, bool) {
	if len(line) == 0 || len(line) > maxJournalLine || line[0] != '{' {
		return entry{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil || dec.More() {
		return entry{}, false
	}
	var e entry
	if err := json.Unmarshal(line, &e); err != nil {
		return entry{}, false
	}
	idx, ok := raw["i"]
	if !ok || !isCanonicalInt(idx) || e.I < 0 || e.I >= total {
		return entry{}, false
	}
	_, hasS := raw["s"]
	_, hasO := raw["o"]
	_, hasR := raw["r"]
	m, hasM := raw["m"]
	for k := range raw {
		if k != "i" && k != "s" && k != "o" && k != "r" && k != "m" {
			return entry{}, false
		}
	}
	switch {
	case hasS && !hasO && !hasR && !hasM:
		return e, e.S == markSending || e.S == markReleased
	case hasO && !hasS:
		if _, ok := outcomeState[e.O]; !ok || len(e.R) > MaxReasonLen {
			return entry{}, false
		}
		if hasM && (!isCanonicalInt(m) || e.M == 0) {
			return entry{}, false
		}
		return e, true
	}
	return entry{}, false
}

// isCanonicalInt reports whether a JSON value is a plain integer literal.
func isCanonicalInt(b json.RawMessage) bool {
	_, err := strconv.ParseInt(string(b), 10, 64)
	return err == nil
}

// replayResult is the state of every recipient after replay.
type replayResult struct {
	states   []state
	migrated map[int]int64
	skipped  int // lines refused
}

// replay reads a journal. Blank, torn and invalid lines are skipped (a torn
// last line from a crash is expected). An outcome is final: later lines for
// that recipient are ignored. "sending" marks an intent; "released" returns
// the recipient to pending.
func replay(r io.Reader, total int) (replayResult, error) {
	res := replayResult{states: make([]state, total), migrated: map[int]int64{}}
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			if e, ok := parseEntry(line, total); ok {
				apply(&res, e)
			} else if len(bytes.TrimSpace(line)) > 0 {
				res.skipped++
			}
		}
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("broadcast: read journal: %w", err)
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// maxJournalLine is returned truncated to maxJournalLine+1 bytes (so it is
// refused) and the rest is discarded.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line) <= maxJournalLine {
			line = append(line, chunk[:min(len(chunk), maxJournalLine+1-len(line))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

func apply(res *replayResult, e entry) {
	cur := res.states[e.I]
	if cur.final() {
		return
	}
	switch {
	case e.O != "":
		res.states[e.I] = outcomeState[e.O]
		if e.M != 0 {
			res.migrated[e.I] = e.M
		}
	case e.S == markSending:
		res.states[e.I] = stateSending
	case e.S == markReleased:
		res.states[e.I] = statePending
	}
}

// journal appends lines to the journal file, each durable (fsynced) before
// append returns. Concurrent appends are committed together (group commit):
// lines queued while a flush is in progress go out in the next flush, with
// one write and one fsync for all of them, so a line waits for at most the
// flush in progress and its own. The lock is checked before every write, so
// no line reaches the file after the lock is lost; after a failed write or
// fsync, or a lost lock, every later append fails with the same error.
type journal struct {
	checkLock func() error
	f         *os.File

	mu       sync.Mutex
	flushed  sync.Cond // broadcast when a flush ends
	pending  []byte    // lines queued, not yet written
	spare    []byte    // the buffer of the last flush, reused
	queued   uint64    // lines queued so far
	durable  uint64    // lines written and fsynced
	flushing bool
	err      error // the first write, sync or lock failure; sticky
}

// openJournal opens (creating it durably if absent) the journal at path.
func openJournal(path string, checkLock func() error) (*journal, error) {
	if err := checkLock(); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("broadcast: open journal: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := terminateTornTail(path, f); err != nil {
		f.Close()
		return nil, err
	}
	j := &journal{checkLock: checkLock, f: f}
	j.flushed.L = &j.mu
	return j, nil
}

// terminateTornTail ends a torn last line (one without its newline, left by
// a crash) with a newline, so the next line appended stays whole.
func terminateTornTail(path string, f *os.File) error {
	r, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("broadcast: open journal: %w", err)
	}
	defer r.Close()
	info, err := r.Stat()
	if err != nil || info.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, info.Size()-1); err != nil {
		return fmt.Errorf("broadcast: read journal: %w", err)
	}
	if last[0] == '\n' {
		return nil
	}
	if _, err := f.Write([]byte{'\n'}); err != nil {
		return fmt.Errorf("broadcast: write journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("broadcast: sync journal: %w", err)
	}
	return nil
}

// append writes e as one line and returns once it is durable.
func (j *journal) append(e entry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	j.pending = appendEntry(j.pending, e)
	j.queued++
	seq := j.queued
	for j.durable < seq && j.err == nil {
		if j.flushing {
			j.flushed.Wait()
			continue
		}
		j.flush()
	}
	if j.durable >= seq {
		return nil
	}
	return j.err
}

// flush writes every queued line with one write and one fsync. The caller
// holds j.mu and no flush is in progress; j.mu is released meanwhile, so
// other lines queue for the next flush.
func (j *journal) flush() {
	j.flushing = true
	buf, target := j.pending, j.queued
	j.pending = j.spare[:0]
	j.mu.Unlock()

	err := j.checkLock()
	if err == nil {
		if _, werr := j.f.Write(buf); werr != nil {
			err = fmt.Errorf("broadcast: write journal: %w", werr)
		}
	}
	if err == nil {
		if serr := j.f.Sync(); serr != nil {
			err = fmt.Errorf("broadcast: sync journal: %w", serr)
		}
	}

	j.mu.Lock()
	j.spare = buf[:0]
	j.flushing = false
	if err != nil {
		j.err = err
	} else {
		j.durable = target
	}
	j.flushed.Broadcast()
}

// appendEntry appends e as one journal line, newline included, exactly as
// json.Marshal would encode it. The common lines (no reason, or a plain
// ASCII one) are written by hand; anything else goes through json.Marshal.
func appendEntry(b []byte, e entry) []byte {
	if !plainJSON(e.S) || !plainJSON(e.O) || !plainJSON(e.R) {
		line, err := json.Marshal(e)
		if err != nil { // cannot happen: entry has only strings and integers
			line = []byte("{}")
		}
		return append(append(b, line...), '\n')
	}
	b = append(b, `{"i":`...)
	b = strconv.AppendInt(b, int64(e.I), 10)
	for _, f := range [...]struct{ key, val string }{{`,"s":"`, e.S}, {`,"o":"`, e.O}, {`,"r":"`, e.R}} {
		if f.val != "" {
			b = append(append(append(b, f.key...), f.val...), '"')
		}
	}
	if e.M != 0 {
		b = append(b, `,"m":`...)
		b = strconv.AppendInt(b, e.M, 10)
	}
	return append(b, '}', '\n')
}

// plainJSON reports whether s encodes as a JSON string without any escape
// (json.Marshal also escapes <, > and &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func (j *journal) close() error { return j.f.Close() }
