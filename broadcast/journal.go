package broadcast

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
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

// Journal line bounds: the entry's JSON, then a space and its checksum.
const (
	maxEntryJSON   = 256
	checksumLen    = 8 // hex digits of a CRC-32C
	maxJournalLine = maxEntryJSON + 1 + checksumLen
)

// castagnoli is the CRC-32C table of the journal's line checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is one journal line's JSON; the line is that JSON, a space, the
// CRC-32C of the JSON as 8 lowercase hex digits, and a newline:
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
	if len(line) == 0 || len(line) > maxEntryJSON || line[0] != '{' {
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

// parseLine checks one whole journal line (without its newline): its
// checksum, then its entry. A refused line gets the reason.
func parseLine(line []byte, total int) (entry, string) {
	if len(line) == 0 {
		return entry{}, "empty line"
	}
	if len(line) > maxJournalLine {
		return entry{}, fmt.Sprintf("longer than %d bytes", maxJournalLine)
	}
	sp := len(line) - checksumLen - 1
	if sp < 1 || line[sp] != ' ' {
		return entry{}, "no checksum"
	}
	want, err := strconv.ParseUint(string(line[sp+1:]), 16, 32)
	if err != nil || !isLowerHex(line[sp+1:]) {
		return entry{}, "no checksum"
	}
	if crc32.Checksum(line[:sp], castagnoli) != uint32(want) {
		return entry{}, "checksum mismatch"
	}
	e, ok := parseEntry(line[:sp], total)
	if !ok {
		return entry{}, "not a valid entry"
	}
	return e, ""
}

func isLowerHex(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// replayResult is the state of every recipient after replay, and what was
// wrong with the journal.
type replayResult struct {
	states   []state
	migrated map[int]int64
	// missing: there is no journal file.
	missing bool
	// damaged lists the first maxDamageListed damaged lines; damagedCount
	// counts them all.
	damaged      []DamagedLine
	damagedCount int
	// intactEnd is the offset just past the last whole (newline-ended)
	// line; bytes after it are a torn last line, tolerated.
	intactEnd int64
	torn      bool
	// The journal mark: missing, unreadable, or the length reached.
	markMissing, markBad bool
	reached              int64
}

func newReplayResult(total int) replayResult {
	return replayResult{states: make([]state, total), migrated: map[int]int64{}}
}

// damage describes the journal's damage, or is nil when there is none. A
// torn last line is not damage.
func (res *replayResult) damage() *Damage {
	d := &Damage{Missing: res.missing, Lines: res.damaged, Count: res.damagedCount, Length: res.intactEnd, Reached: res.reached}
	switch {
	case res.missing:
	case res.markMissing:
		d.Mark = "missing"
	case res.markBad:
		d.Mark = "unreadable"
	case res.reached > res.intactEnd:
		d.Truncated = true
	}
	if !d.Missing && d.Mark == "" && !d.Truncated && d.Count == 0 {
		return nil
	}
	for _, s := range res.states {
		if !s.final() {
			d.Affected++
		}
	}
	return d
}

// replay reads a journal. Every whole line must carry a valid checksum and
// entry; one that does not is recorded as damaged and not applied. The
// bytes after the last newline are a torn last line (a crash in the middle
// of an append): tolerated and not applied, so its recipient keeps the
// state of its earlier lines (an intent without outcome becomes uncertain).
// An outcome is final: later lines for that recipient are ignored.
// "sending" marks an intent; "released" returns the recipient to pending.
func replay(r io.Reader, total int) (replayResult, error) {
	res := newReplayResult(total)
	br := bufio.NewReaderSize(r, 4096)
	var off int64
	for n := 1; ; n++ {
		line, size, err := readLine(br)
		whole := err == nil // ended by a newline
		if whole {
			if e, why := parseLine(line, total); why == "" {
				apply(&res, e)
			} else {
				res.damagedCount++
				if len(res.damaged) < maxDamageListed {
					res.damaged = append(res.damaged, DamagedLine{Line: n, Offset: off, Reason: why})
				}
			}
			off += size
			res.intactEnd = off
			continue
		}
		if err == io.EOF {
			res.torn = size > 0
			return res, nil
		}
		return res, fmt.Errorf("broadcast: read journal: %w", err)
	}
}

// readLine returns the next line without its newline and the bytes it
// took, newline included; err is nil only for a newline-ended line. A line
// longer than maxJournalLine is returned truncated to maxJournalLine+1
// bytes (so it is refused) and the rest is discarded.
func readLine(br *bufio.Reader) (line []byte, size int64, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		size += int64(len(chunk))
		if len(line) <= maxJournalLine {
			line = append(line, chunk[:min(len(chunk), maxJournalLine+1-len(line))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), size, err
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
	mark      *os.File // journal.mark, overwritten after each flush
	size      int64    // bytes durable in f; only flush changes it

	mu       sync.Mutex
	flushed  sync.Cond // broadcast when a flush ends
	pending  []byte    // lines queued, not yet written
	spare    []byte    // the buffer of the last flush, reused
	queued   uint64    // lines queued so far
	durable  uint64    // lines written and fsynced
	flushing bool
	err      error // the first write, sync or lock failure; sticky
	markBuf  [markLen]byte
}

// openJournal opens (creating it durably if absent) the journal at path and
// its mark. A torn last line (bytes past intactEnd, as replay found them)
// is cut off, so the next line appended stays whole; the caller holds the
// lock.
func openJournal(path string, intactEnd int64, checkLock func() error) (*journal, error) {
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
	if err := cutTornTail(f, intactEnd); err != nil {
		f.Close()
		return nil, err
	}
	mark, err := os.OpenFile(filepath.Join(filepath.Dir(path), markFile), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("broadcast: open journal mark: %w", err)
	}
	if _, err := mark.WriteAt(appendMark(nil, intactEnd), 0); err != nil {
		f.Close()
		mark.Close()
		return nil, fmt.Errorf("broadcast: write journal mark: %w", err)
	}
	j := &journal{checkLock: checkLock, f: f, mark: mark, size: intactEnd}
	j.flushed.L = &j.mu
	return j, nil
}

// cutTornTail truncates f to intactEnd when it is longer: the torn last
// line replay skipped. Its recipient's state came from its earlier lines.
func cutTornTail(f *os.File, intactEnd int64) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("broadcast: stat journal: %w", err)
	}
	if info.Size() <= intactEnd {
		return nil
	}
	if err := f.Truncate(intactEnd); err != nil {
		return fmt.Errorf("broadcast: cut torn journal line: %w", err)
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
	if err == nil {
		j.size += int64(len(buf))
		if _, merr := j.mark.WriteAt(appendMark(j.markBuf[:0], j.size), 0); merr != nil {
			err = fmt.Errorf("broadcast: write journal mark: %w", merr)
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

// appendEntry appends e as one journal line: its JSON exactly as
// json.Marshal would encode it, a space, its checksum and a newline. The
// common lines (no reason, or a plain ASCII one) are encoded by hand;
// anything else goes through json.Marshal.
func appendEntry(b []byte, e entry) []byte {
	start := len(b)
	b = appendEntryJSON(b, e)
	sum := crc32.Checksum(b[start:], castagnoli)
	b = append(b, ' ')
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, "0123456789abcdef"[sum>>shift&0xf])
	}
	return append(b, '\n')
}

// appendEntryJSON appends e's JSON, without newline.
func appendEntryJSON(b []byte, e entry) []byte {
	if !plainJSON(e.S) || !plainJSON(e.O) || !plainJSON(e.R) {
		line, err := json.Marshal(e)
		if err != nil { // cannot happen: entry has only strings and integers
			line = []byte("{}")
		}
		return append(b, line...)
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
	return append(b, '}')
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

func (j *journal) close() error {
	merr := j.mark.Close()
	if err := j.f.Close(); err != nil {
		return err
	}
	return merr
}
