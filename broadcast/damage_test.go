package broadcast

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// halfSent runs broadcast "b" of 40 recipients and stops it after 20
// deliveries: 20 delivered, 20 pending, 40 journal lines.
func halfSent(t *testing.T) (*harness, Config) {
	t.Helper()
	h := newHarness(t)
	cfg := h.config(seq(40)...)
	cfg.Fingerprint = Message{Text: "hello"}.Fingerprint()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var sent atomic.Int32
	h.result = func(context.Context, Recipient, int) error {
		if sent.Add(1) == 20 {
			cancel()
		}
		return nil
	}
	rep, err := Run(ctx, cfg)
	must(t, err)
	wantCounts(t, rep, StateStopped, 20, 0, 0, 0, 20)
	h.result = nil
	return h, cfg
}

func seq(n int) []int64 {
	xs := make([]int64, n)
	for i := range xs {
		xs[i] = int64(i + 1)
	}
	return xs
}

func (h *harness) path(name string) string { return filepath.Join(h.dir, "b", name) }

// refused checks that Run refuses the damaged journal with a DamageError,
// sends nothing, and that Inspect and a dry run report the same damage.
func refused(t *testing.T, h *harness, cfg Config) *Damage {
	t.Helper()
	before := len(h.sent())
	_, err := Run(t.Context(), cfg)
	var de *DamageError
	if !errors.As(err, &de) || !errors.Is(err, ErrJournalDamaged) {
		t.Fatalf("Run = %v, want a DamageError", err)
	}
	if !strings.Contains(err.Error(), "RepairUncertain") || !strings.Contains(err.Error(), journalFile) {
		t.Errorf("error %q does not name the journal and the choice", err)
	}
	if n := len(h.sent()) - before; n != 0 {
		t.Fatalf("a refused run sent %d messages", n)
	}
	dry := cfg
	dry.DryRun = true
	if _, err := Run(t.Context(), dry); !errors.As(err, &de) {
		t.Errorf("dry run = %v, want a DamageError", err)
	}
	st := inspect(t, h.dir, "b")
	if st.Damage == nil || st.Damage.String() != de.Damage.String() {
		t.Errorf("Inspect damage %v, want %v", st.Damage, &de.Damage)
	}
	return &de.Damage
}

// repaired runs with RepairUncertain and checks that no recipient got a
// second message, that every recipient without an outcome in the intact
// lines is now uncertain, that the damaged journal is kept and that the
// next run finds no damage.
func repaired(t *testing.T, h *harness, cfg Config, wantUncertain int) {
	t.Helper()
	cfg.RepairUncertain = true
	rep := run(t, cfg)
	for r, n := range h.counts {
		if n > 1 {
			t.Errorf("recipient %v sent %d times", r, n)
		}
	}
	if rep.Uncertain != wantUncertain || rep.Pending != 0 {
		t.Errorf("after repair: %+v, want %d uncertain, none pending", rep, wantUncertain)
	}
	cfg.RepairUncertain = false
	again := run(t, cfg)
	if again.Uncertain != wantUncertain || again.Delivered != rep.Delivered {
		t.Errorf("the run after the repair: %+v", again)
	}
	if st := inspect(t, h.dir, "b"); st.Damage != nil {
		t.Errorf("damage after repair: %v", st.Damage)
	}
	h.journal() // every line sealed
}

func TestDamageCutToHalf(t *testing.T) {
	t.Parallel()
	h, cfg := halfSent(t)
	info, err := os.Stat(h.path(journalFile))
	must(t, err)
	must(t, os.Truncate(h.path(journalFile), info.Size()/2))
	d := refused(t, h, cfg)
	if !d.Truncated || d.Reached != info.Size() || d.Length >= info.Size()/2 {
		t.Errorf("damage %+v, want the journal cut short of %d bytes", d, info.Size())
	}
	// The intact half holds about 10 delivered; the other 30 are uncertain.
	intact, err := replayFile(h.path(journalFile), 40)
	must(t, err)
	delivered := 0
	for _, s := range intact.states {
		if s == stateDelivered {
			delivered++
		}
	}
	repaired(t, h, cfg, 40-delivered)
	matches, _ := filepath.Glob(h.path(journalFile + ".damaged-*"))
	if len(matches) != 1 {
		t.Errorf("damaged journal kept as %v, want one copy", matches)
	}
}

func TestDamageZeroedMiddle(t *testing.T) {
	t.Parallel()
	h, cfg := halfSent(t)
	b, err := os.ReadFile(h.path(journalFile))
	must(t, err)
	mid := len(b) / 2
	copy(b[mid:mid+30], make([]byte, 30))
	must(t, os.WriteFile(h.path(journalFile), b, 0o600))
	d := refused(t, h, cfg)
	if d.Count < 1 || d.Truncated || d.Lines[0].Offset > int64(mid) || !strings.Contains(d.String(), "line ") {
		t.Errorf("damage %+v (%s), want the damaged line(s) around byte %d", d, d, mid)
	}
	if d.Affected < 20 {
		t.Errorf("Affected = %d, want at least the 20 pending", d.Affected)
	}
	repaired(t, h, cfg, d.Affected)
}

func TestDamageDeletedJournal(t *testing.T) {
	t.Parallel()
	h, cfg := halfSent(t)
	must(t, os.Remove(h.path(journalFile)))
	d := refused(t, h, cfg)
	if !d.Missing || d.Affected != 40 {
		t.Errorf("damage %+v, want the journal missing with 40 affected", d)
	}
	repaired(t, h, cfg, 40)
}

func TestDamageDeletedMark(t *testing.T) {
	t.Parallel()
	h, cfg := halfSent(t)
	must(t, os.Remove(h.path(markFile)))
	if d := refused(t, h, cfg); d.Mark != "missing" {
		t.Errorf("damage %+v, want the mark missing", d)
	}
	must(t, os.WriteFile(h.path(markFile), []byte("garbage"), 0o600))
	if d := refused(t, h, cfg); d.Mark != "unreadable" {
		t.Errorf("damage %+v, want the mark unreadable", d)
	}
}

// A torn last line alone is a crash, not damage: the run resumes.
func TestTornLastLineResumes(t *testing.T) {
	t.Parallel()
	h, cfg := halfSent(t)
	f, err := os.OpenFile(h.path(journalFile), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString(`{"i":20,"s":"send`)
	must(t, err)
	must(t, f.Close())
	if st := inspect(t, h.dir, "b"); st.Damage != nil {
		t.Fatalf("a torn last line reported as damage: %v", st.Damage)
	}
	rep := run(t, cfg)
	wantCounts(t, rep, StateFinished, 40, 0, 0, 0, 0)
	for r, n := range h.counts {
		if n != 1 {
			t.Errorf("recipient %v sent %d times", r, n)
		}
	}
	h.journal() // the torn tail was cut: every line sealed
}

// Resuming with another message is refused; the same message resumes.
func TestChangedMessageRefused(t *testing.T) {
	t.Parallel()
	h, cfg := halfSent(t)
	other := cfg
	other.Fingerprint = Message{Text: "hello!"}.Fingerprint()
	if _, err := Run(t.Context(), other); !errors.Is(err, ErrMessageChanged) {
		t.Fatalf("Run with another message = %v, want ErrMessageChanged", err)
	}
	if n := len(h.sent()); n != 20 {
		t.Fatalf("sent %d, want the first run's 20", n)
	}
	rep := run(t, cfg)
	wantCounts(t, rep, StateFinished, 40, 0, 0, 0, 0)
	if a, b := (Message{Text: "x"}).Fingerprint(), (Message{Text: "x", ParseMode: "HTML"}).Fingerprint(); a == b {
		t.Error("the parse mode does not change the fingerprint")
	}
}
