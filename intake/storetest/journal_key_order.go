package storetest

import (
	"fmt"
	"strings"

	"github.com/tgrelay/tgrelay/intake"
)

// journalHashBeforeOccurrenceRule is the rule of journalHashBeforeOccurrence.
const journalHashBeforeOccurrenceRule = "Journal orders entries of one intent time and method by parameters hash before occurrence"

// journalHashBeforeOccurrence: [intake.JournalStore.Journal] lists an
// update's entries by intent time, then method, parameters hash and
// occurrence, in that order of keys. Three calls of one method in one
// millisecond have hashes and occurrences that sort the opposite ways
// (hash "b" occurrence 1, hash "a" occurrence 2, hash "a" occurrence 3),
// so a listing that compares occurrences before hashes shows
// (Journal/ListedInKeyOrder's calls sort the same by either).
func journalHashBeforeOccurrence(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, defaultMax), 1)
	for _, call := range []intake.Call{
		{Method: "sendMessage", ParamsHash: "b", Occurrence: 1},
		{Method: "sendMessage", ParamsHash: "a", Occurrence: 2},
		{Method: "sendMessage", ParamsHash: "a", Occurrence: 3},
	} {
		c.mustIntent(id, call, 10, intake.IntentRecorded)
	}
	var got []string
	for _, e := range c.entries(1) {
		got = append(got, fmt.Sprintf("%s/%s/%d", e.Method, e.ParamsHash, e.Occurrence))
	}
	want := "sendMessage/a/2 sendMessage/a/3 sendMessage/b/1"
	if s := strings.Join(got, " "); s != want {
		c.errorf("Journal(1) of three calls intended at 10ms lists %s; want %s (hash before occurrence)", s, want)
	}
}
