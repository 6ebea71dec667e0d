package broadcast

import (
	"bytes"
	"encoding/json"
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

func TestReplay(t *testing.T) {
	t.Parallel()
	journal := strings.Join([]string{
		`{"i":0,"s":"sending"}`,
		`{"i":0,"o":"delivered"}`,
		`{"i":0,"s":"sending"}`, // after an outcome: ignored, outcomes are final
		`{"i":1,"s":"sending"}`,
		`garbage`,
		`{"i":2,"s":"sending"}`,
		`{"i":2,"s":"released"}`,
		`{"i":3,"s":"sending"}`,
		`{"i":3,"o":"unreachable","r":"blocked-by-user"}`,
		`{"i":4,"s":"sending"}`,
		`{"i":4,"o":"delivered","m":-1004}`,
		`{"i":5,"o":"failed"}`,
		`{"i":6,"o":"uncertain"}`,
		`{"i":7,"s":"sending"}`,
		"{\"i\":7,\"o\":\"deli" + strings.Repeat("x", 10000), // huge torn line
		`{"i":8,"o":"delivered"}`,
		`{"i":9,"o":"deliv`, // torn last line
	}, "\n")
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
	if res.skipped != 3 {
		t.Errorf("skipped %d, want 3", res.skipped)
	}
}

// FuzzReplay feeds arbitrary journals: replay never fails on content, keeps
// every state in range, and a journal of valid lines replays to the states
// those lines set.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(`{"i":0,"s":"sending"}`+"\n"+`{"i":0,"o":"delivered"}`+"\n"+`{"i":1,"s":"sen`), 3)
	f.Add([]byte(`{"i":2,"o":"failed","r":"x"}`+"\n\n"+`{"i":1,"s":"released"}`), 3)
	f.Add([]byte("\x00\xff{\n}\n"), 1)
	f.Add([]byte(`{"i":0,"o":"delivered","m":-5}`), 1)
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
		// Re-encode the valid lines canonically: replay must agree.
		var canon bytes.Buffer
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if e, ok := parseEntry(line, total); ok {
				b, err := json.Marshal(e)
				if err != nil {
					t.Fatal(err)
				}
				canon.Write(append(b, '\n'))
			}
		}
		again, err := replay(&canon, total)
		if err != nil {
			t.Fatal(err)
		}
		for i := range res.states {
			if res.states[i] != again.states[i] {
				t.Fatalf("state[%d]: %d from the journal, %d from its valid lines", i, res.states[i], again.states[i])
			}
		}
	})
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
