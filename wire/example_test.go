package wire_test

import (
	"fmt"
	"net/http"

	"github.com/tgrelay/tgrelay/wire"
)

// An app reads the identity of an update forward from its headers, and
// hands the per-attempt API root to its Telegram library.
func Example() {
	forward := http.Header{}
	wire.SetIdentity(forward, 7, 1, "c-9")
	forward.Set(wire.HeaderAPIRoot, wire.AttemptRoot("http://127.0.0.1:8081", 7, 1, "c-9"))

	u, a, c, err := wire.ParseIdentity(forward.Get(wire.HeaderUpdateID), forward.Get(wire.HeaderAttempt), forward.Get(wire.HeaderClaimID))
	fmt.Println(u, a, c, err)
	fmt.Println(forward.Get(wire.HeaderAPIRoot))

	answer := http.Header{}
	answer.Set(wire.HeaderOutcome, string(wire.OutcomeUnknown))
	fmt.Println(wire.OutcomeOf(answer), wire.OutcomeOf(http.Header{}))
	// Output:
	// 7 1 c-9 <nil>
	// http://127.0.0.1:8081/a/7/1/c-9/bot
	// unknown answered
}
