package broadcast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEntry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		ok   bool
	}{
		{`{"i":0,"s":"sending"}`, true},
		{`{"i":2,"s":"released"}`, true},
		{`{"i":1,"o":"delivered"}`, true},
		{`{"i":1,"o":"unreachable","r":"blocked-by-user"}`, true},
		{`{"i":1,"o":"failed","r":"server-error"}`, true},
		{`{"i":1,"o":"uncertain"}`, true},
		{`{"i":1,"o":"delivered","m":-1005}`, true},
		{``, false},
		{`   `, false},
		{`{"i":1,"o":"deliv`, false},                     // torn
		{`{"i":1,"o":"delivered"} x`, false},             // trailing garbage
		{`{"i":1,"o":"delivered","x":1}`, false},         // unknown key
		{`{"i":1,"o":"sent"}`, false},                    // unknown outcome
		{`{"i":1,"s":"sent"}`, false},                    // unknown marker
		{`{"i":1,"s":"sending","o":"delivered"}`, false}, // both
		{`{"i":1,"s":"sending","r":"x"}`, false},         // reason on a marker
		{`{"i":1}`, false},                               // neither
		{`{"s":"sending"}`, false},                       // no index
		{`{"i":-1,"s":"sending"}`, false},                // index below range
		{`{"i":3,"s":"sending"}`, false},                 // index above range (total 3)
		{`{"i":1.0,"s":"sending"}`, false},               // not an integer literal
		{`{"i":"1","s":"sending"}`, false},               // string index
		{`{"i":1,"o":"delivered","m":0}`, false},         // zero migration
		{`{"i":1,"o":"delivered","m":1.5}`, false},       // fractional migration
		{`{"i":1,"o":"failed","r":"` + strings.Repeat("x", MaxReasonLen+1) + `"}`, false},
		{`[1]`, false},
	}
	for _, tt := range tests {
		if _, ok := parseEntry([]byte(tt.line), 3); ok != tt.ok {
			t.Errorf("parseEntry(%s) ok = %v, want %v", tt.line, ok, tt.ok)
		}
	}
}

// sealed returns a journal line of the entry JSON js: js, a space, its
// checksum and a newline.
func sealed(js string) string {
	return fmt.Sprintf("%s %08x\n", js, crc32.Checksum([]byte(js), castagnoli))
}

// journalOf seals every entry JSON into one journal.
func journalOf(jsons ...string) string {
	var b strings.Builder
	for _, js := range jsons {
		b.WriteString(sealed(js))
	}
	return b.String()
}

func TestParseLine(t *testing.T) {
	t.Parallel()
	good := strings.TrimSuffix(sealed(`{"i":1,"o":"delivered"}`), "\n")
	tests := []struct{ line, why string }{
		{good, ""},
		{``, "empty line"},
		{`{"i":1,"o":"delivered"}`, "no checksum"},
		{good[:len(good)-8] + strings.ToUpper(good[len(good)-8:]), "no checksum"},
		{good[:len(good)-9] + "-" + good[len(good)-8:], "no checksum"},
		{strings.Replace(good, "delivered", "delivereD", 1), "checksum mismatch"},
		{strings.TrimSuffix(sealed(`{"i":9,"o":"delivered"}`), "\n"), "not a valid entry"}, // index above total
		{strings.Repeat("x", maxJournalLine+1), "longer than 265 bytes"},
	}
	for _, tt := range tests {
		if _, why := parseLine([]byte(tt.line), 3); why != tt.why {
			t.Errorf("parseLine(%q) = %q, want %q", tt.line, why, tt.why)
		}
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	journal := journalOf(
		`{"i":0,"s":"sending"}`,
		`{"i":0,"o":"delivered"}`,
		`{"i":0,"s":"sending"}`, // after an outcome: ignored, outcomes are final
		`{"i":1,"s":"sending"}`,
		`{"i":2,"s":"sending"}`,
		`{"i":2,"s":"released"}`,
		`{"i":3,"s":"sending"}`,
		`{"i":3,"o":"unreachable","r":"blocked-by-user"}`,
		`{"i":4,"s":"sending"}`,
		`{"i":4,"o":"delivered","m":-1004}`,
		`{"i":5,"o":"failed"}`,
		`{"i":6,"o":"uncertain"}`,
		`{"i":7,"s":"sending"}`,
		`{"i":8,"o":"delivered"}`,
	) + `{"i":9,"o":"deliv` // torn last line: tolerated
	res, err := replay(strings.NewReader(journal), 10)
	must(t, err)
	want := []state{stateDelivered, stateSending, statePending, stateUnreachable, stateDelivered,
		stateFailed, stateUncertain, stateSending, stateDelivered, statePending}
	for i := range want {
		if res.states[i] != want[i] {
			t.Errorf("state[%d] = %d, want %d", i, res.states[i], want[i])
		}
	}
	if res.migrated[4] != -1004 || len(res.migrated) != 1 {
		t.Errorf("migrated %v", res.migrated)
	}
	if d := res.damage(); d != nil || !res.torn || res.intactEnd != int64(strings.LastIndexByte(journal, '\n')+1) {
		t.Errorf("damage %v, torn %v, intactEnd %d; want none, a torn tail, the last newline", d, res.torn, res.intactEnd)
	}
}

// Damage anywhere but a torn last line is found, with its line and offset,
// and not applied.
func TestReplayDamage(t *testing.T) {
	t.Parallel()
	l1, l2, l3 := sealed(`{"i":0,"s":"sending"}`), sealed(`{"i":0,"o":"delivered"}`), sealed(`{"i":1,"s":"sending"}`)
	zeroed := l1 + "\x00\x00\x00\x00" + l2[4:] + l3
	torn := l1 + l2[:10] + "\n" + l3 // a tear in the middle, ended by a later line
	huge := l1 + strings.Repeat("y", 10000) + "\n" + l3
	blank := l1 + "\n" + l3
	for name, tt := range map[string]struct {
		journal string
		line    int
		offset  int
		why     string
	}{
		"zeroed middle bytes": {zeroed, 2, len(l1), "checksum mismatch"},
		"torn middle line":    {torn, 2, len(l1), "no checksum"},
		"huge line":           {huge, 2, len(l1), "longer than 265 bytes"},
		"blank line":          {blank, 2, len(l1), "empty line"},
	} {
		res, err := replay(strings.NewReader(tt.journal), 3)
		must(t, err)
		d := res.damage()
		if d == nil || d.Count != 1 || d.Lines[0] != (DamagedLine{Line: tt.line, Offset: int64(tt.offset), Reason: tt.why}) {
			t.Errorf("%s: damage %+v, want line %d at %d: %s", name, d, tt.line, tt.offset, tt.why)
			continue
		}
		if res.states[0] != stateSending || res.states[1] != stateSending {
			t.Errorf("%s: states %v: the damaged line was applied or the intact ones were not", name, res.states)
		}
		if d.Affected != 3 {
			t.Errorf("%s: Affected = %d, want 3 (no recipient has an outcome)", name, d.Affected)
		}
	}
}

// FuzzReplay feeds arbitrary journals: replay never fails on content, keeps
// every state in range, and a journal of its intact lines replays to the
// same states without damage.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(journalOf(`{"i":0,"s":"sending"}`, `{"i":0,"o":"delivered"}`)+`{"i":1,"s":"sen`), 3)
	f.Add([]byte(journalOf(`{"i":2,"o":"failed","r":"x"}`)+"\n"+journalOf(`{"i":1,"s":"released"}`)), 3)
	f.Add([]byte("\x00\xff{\n}\n"), 1)
	f.Add([]byte(journalOf(`{"i":0,"o":"delivered","m":-5}`)), 1)
	f.Fuzz(func(t *testing.T, data []byte, total int) {
		total = (total%64 + 64) % 64
		res, err := replay(bytes.NewReader(data), total)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.states) != total {
			t.Fatalf("%d states, total %d", len(res.states), total)
		}
		for i, s := range res.states {
			if s > stateUncertain {
				t.Fatalf("state[%d] = %d", i, s)
			}
		}
		if res.intactEnd > int64(len(data)) || res.torn != (res.intactEnd < int64(len(data))) {
			t.Fatalf("intactEnd %d, torn %v, %d bytes", res.intactEnd, res.torn, len(data))
		}
		var intact bytes.Buffer
		must(t, copyIntactLinesTo(&intact, data, total))
		again, err := replay(&intact, total)
		if err != nil {
			t.Fatal(err)
		}
		if again.damage() != nil || again.torn {
			t.Fatalf("the intact lines replay with damage %+v", again.damage())
		}
		for i := range res.states {
			if res.states[i] != again.states[i] {
				t.Fatalf("state[%d]: %d from the journal, %d from its intact lines", i, res.states[i], again.states[i])
			}
		}
	})
}

// copyIntactLinesTo is copyIntactLines on bytes.
func copyIntactLinesTo(w io.Writer, data []byte, total int) error {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("fuzz-journal-%d-%d", os.Getpid(), rand.Int64()))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	defer os.Remove(path)
	return copyIntactLines(w, path, total)
}

func TestRecipientJSON(t *testing.T) {
	t.Parallel()
	good := map[string]Recipient{`123`: ChatID(123), `-1001234567890`: ChatID(-1001234567890), `"@chan_1"`: Username("@chan_1")}
	for in, want := range good {
		var r Recipient
		if err := json.Unmarshal([]byte(in), &r); err != nil || r != want {
			t.Errorf("Unmarshal(%s) = %v, %v", in, r, err)
		}
	}
	for _, in := range []string{`0`, `1.5`, `1e3`, `"x"`, `"@ab"`, `"@1abcd"`, `"@abc-de"`, `"123"`, `null`, `true`, `9223372036854775808`, `"@` + strings.Repeat("a", 33) + `"`} {
		var r Recipient
		if err := json.Unmarshal([]byte(in), &r); err == nil {
			t.Errorf("Unmarshal(%s) accepted: %v", in, r)
		}
	}
	if r, err := ParseRecipient("-100"); err != nil || r != ChatID(-100) {
		t.Errorf("ParseRecipient: %v %v", r, err)
	}
	if _, err := ParseRecipient("abc"); err == nil {
		t.Error("ParseRecipient(abc) accepted")
	}
	if err := (Recipient{ID: 1, Username: "@abcde"}).Validate(); err == nil {
		t.Error("both set accepted")
	}
}
