package telegramtest

import (
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/tghtml"
)

// FuzzFormatText feeds arbitrary text to every parse mode's parser: none
// may panic, and whatever is accepted has entities inside the plain text
// and never more plain text than was sent.
func FuzzFormatText(f *testing.F) {
	for _, seed := range []string{
		"*bold _both_* __under__ ~gone~ ||secret|| [link](https://x.y/a\\)b) \\. done",
		"`code` and\n```go\nx := 1```", ">quote\n>more\nafter", "**>expandable\n>quote||\nnext",
		"![👍](tg://emoji?id=5368324170671202286)", "___italic underline___", "Hello.", "*open",
		"[text](http://unclosed", "\\", "a\\", "😀 *é*", "<b>bold <i>x</i></b>", "_*`[", "```\n```",
		"[a](b)", "||a|| ||", "\x00\xff*",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, mode := range []string{"MarkdownV2", "Markdown", "HTML", ""} {
			plain, ents, e := formatText(in, mode, "")
			if e != nil {
				if !strings.HasPrefix(e.desc, "Bad Request: ") {
					t.Fatalf("%s: refusal %q is not Telegram-shaped", mode, e.desc)
				}
				continue
			}
			if mode != "HTML" && len(plain) > len(in) {
				t.Fatalf("%s(%q): plain text %q is longer than the input", mode, in, plain)
			}
			n := tghtml.Len(plain)
			for _, en := range ents {
				if en.Offset < 0 || en.Length <= 0 || en.Offset+en.Length > n {
					t.Fatalf("%s(%q) = %q: entity %+v outside %d units", mode, in, plain, en, n)
				}
			}
		}
	})
}
