package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A damaged journal: run refuses (exit 5, naming the damage and the flag),
// status reports it, --repair-uncertain goes on without a second copy to
// anyone. One subtest per kind of damage the issue found resending.
func TestBroadcastDamagedJournal(t *testing.T) {
	t.Parallel()
	for name, damage := range map[string]func(t *testing.T, journal string){
		"cut to half": func(t *testing.T, journal string) {
			info, err := os.Stat(journal)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(journal, info.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
		"zeroed middle bytes": func(t *testing.T, journal string) {
			b, err := os.ReadFile(journal)
			if err != nil {
				t.Fatal(err)
			}
			copy(b[len(b)/2:], make([]byte, 40))
			if err := os.WriteFile(journal, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"deleted journal": func(t *testing.T, journal string) {
			if err := os.Remove(journal); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newBCFixture(t, 12)
			const text = "damage drill"
			if r := f.runBC(t, t.Context(), f.args("d", "--text", text)...); r.code != exitOK {
				t.Fatalf("run = %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			damage(t, filepath.Join(f.stateDir, "d", "journal.ndjson"))
			calls := f.srv.Calls()["sendMessage"]

			r := f.runBC(t, t.Context(), f.args("d", "--text", text)...)
			if r.code != exitBroadcastDamaged || !strings.Contains(r.stderr, "--repair-uncertain") || !strings.Contains(r.stderr, "damaged") {
				t.Fatalf("run on a damaged journal = %d, want %d naming the damage and --repair-uncertain\n%s%s", r.code, exitBroadcastDamaged, r.stdout, r.stderr)
			}
			s := f.runBC(t, t.Context(), "status", "--name", "d", "--state-dir", f.stateDir)
			if s.code != exitOK || !strings.Contains(s.stdout, "DAMAGED: ") {
				t.Errorf("status = %d, want it to report the damage\n%s%s", s.code, s.stdout, s.stderr)
			}
			sj := f.runBC(t, t.Context(), "status", "--name", "d", "--state-dir", f.stateDir, "--json")
			var st broadcastStatusJSON
			if err := json.Unmarshal([]byte(sj.stdout), &st); err != nil || st.Damage == nil || st.Damage.Description == "" {
				t.Errorf("status --json = %v %q, want a damage object", err, sj.stdout)
			}
			if got := f.srv.Calls()["sendMessage"]; got != calls {
				t.Fatalf("the refused run sent %d messages", got-calls)
			}

			r = f.runBC(t, t.Context(), f.args("d", "--text", text, "--repair-uncertain")...)
			if r.code != exitOK {
				t.Fatalf("run --repair-uncertain = %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			for chat, n := range f.perChat() {
				if n != 1 {
					t.Errorf("chat %d got %d messages, want 1", chat, n)
				}
			}
			after := f.status(t, "d")
			if after.Delivered+after.Uncertain != 12 || after.Pending != 0 {
				t.Errorf("status after repair = %+v", after)
			}
		})
	}
}

// Resuming with another --text is refused before anything is sent.
func TestBroadcastChangedTextRefused(t *testing.T) {
	t.Parallel()
	f := newBCFixture(t, 3)
	if r := f.runBC(t, t.Context(), f.args("c", "--text", "text A")...); r.code != exitOK {
		t.Fatalf("run = %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, extra := range [][]string{{"--text", "text B"}, {"--text", "text A", "--html"}} {
		r := f.runBC(t, t.Context(), f.args("c", extra...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "another message") {
			t.Errorf("run %v = %d, want %d refusing another message\n%s%s", extra, r.code, exitUsage, r.stdout, r.stderr)
		}
	}
	f.requireEachOnce(t, "text A")
}
