package readall_test

import (
	"fmt"
	"strings"

	"github.com/tgrelay/tgrelay/internal/readall"
)

func Example() {
	body := `{"chat_id":42,"text":"hi"}`
	// A request's ContentLength sizes the buffer; the limit bounds the read.
	b, err := readall.Bounded(strings.NewReader(body), int64(len(body)), 64<<10)
	fmt.Println(string(b), len(b), cap(b), err)
	// Output: {"chat_id":42,"text":"hi"} 26 27 <nil>
}
