package tghtml_test

import (
	"fmt"

	"github.com/tgrelay/tgrelay/tghtml"
)

func Example() {
	markup := `<p>Hello <strong>` + tghtml.Escape("<Ann & Bob>") + `</strong></p><script>x</script>`
	fmt.Printf("%q\n", tghtml.Sanitize(markup))
	fmt.Println(tghtml.Check("a < b"))
	fmt.Println(tghtml.Len(tghtml.Text("<b>👍</b>")))

	short, _ := tghtml.Truncate("<b>broadcast resumed after a crash</b>", 16)
	fmt.Println(short)

	parts, _ := tghtml.Split(`<i>one two three</i>`, 8)
	fmt.Printf("%q\n", parts)
	// Output:
	// "Hello <b>&lt;Ann &amp; Bob&gt;</b>\n\nx"
	// tghtml: bare-character at byte 2
	// 2
	// <b>broadcast</b>…
	// ["<i>one two</i>" "<i>three</i>"]
}

// Plain text (sent without a parse mode) cut to Telegram's limit, counted
// in UTF-16 units: the emoji counts two.
func ExampleTruncateText() {
	fmt.Println(tghtml.TruncateText("disk full on db-1 😀 again", 21))
	// Output: disk full on db-1 😀…
}
