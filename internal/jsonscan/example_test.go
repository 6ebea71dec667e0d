package jsonscan_test

import (
	"encoding/json"
	"fmt"

	"github.com/tgrelay/tgrelay/internal/jsonscan"
)

// Reading the top-level members of a call's body, nested values skipped
// whole: reply_markup's chat_id is not a top-level member.
func Example() {
	body := []byte(`{"chat_id": -100123, "text": "hi \"you\"", "reply_markup": {"chat_id": 7}, "caf\u00e9": 1}`)
	if !json.Valid(body) {
		return // the scanner's input must be valid JSON
	}
	s := jsonscan.New(body)
	s.Space()
	if !s.Consume('{') {
		return // not an object
	}
	for key, raw, more := s.Member(); more; key, raw, more = s.Member() {
		if key == nil {
			fmt.Printf("(a key to decode) = %s\n", raw)
			continue
		}
		fmt.Printf("%s = %s\n", key, raw)
	}
	fmt.Println("bad:", s.Bad())
	// Output:
	// chat_id = -100123
	// text = "hi \"you\""
	// reply_markup = {"chat_id": 7}
	// (a key to decode) = 1
	// bad: false
}
