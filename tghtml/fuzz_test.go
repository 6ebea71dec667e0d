package tghtml

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"",
	"plain",
	"<b>bold <i>it</i></b> &amp; a < b",
	`<a href="https://e.com/?a=1&amp;b=2">l</a>`,
	`<pre><code class="language-go">x := 1</code></pre>`,
	`<blockquote expandable>q<blockquote>in</blockquote></blockquote>`,
	`<tg-emoji emoji-id="123">👍</tg-emoji> <tg-time unix="1" format="wDT">12 May</tg-time>`,
	"<p>a</p><p>b<br><br>c</p><div>d</div>",
	"<span class=\"tg-spoiler\">s</span><script>x</script>&#128077;&nbsp;&apos;",
	"<b>x<i>y</b>z</i>\xff",
	"aaa bbb\n\nccc\nddd eee fff",
}

// FuzzParseRoundTrip checks that Parse → Render → Parse is stable and that
// Render output always passes Check.
func FuzzParseRoundTrip(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, markup string) {
		nodes := Parse(markup)
		out := Render(nodes)
		if p := Check(out); p != nil {
			t.Fatalf("Check(Render(Parse(%q))) = %v; rendered %q", markup, p, out)
		}
		again := Parse(out)
		if !reflect.DeepEqual(nodes, again) {
			t.Fatalf("round trip unstable for %q:\n first %#v\nsecond %#v", markup, nodes, again)
		}
		if Render(again) != out {
			t.Fatalf("render unstable for %q", markup)
		}
	})
}

// FuzzSplit checks that every part is valid and within the limit, and that
// the parts' texts join to the original text (up to dropped whitespace).
func FuzzSplit(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, 2+i)
	}
	f.Fuzz(func(t *testing.T, markup string, limit int) {
		if limit < MinLimit || limit > 64 {
			limit = MinLimit + (limit%63+63)%63
		}
		parts, err := Split(markup, limit)
		if err != nil {
			t.Fatal(err)
		}
		checkParts(t, markup, limit, parts)
	})
}

// FuzzTruncate checks that the result is valid, within the limit, and a
// prefix of the original visible text (plus the ellipsis) when cut.
func FuzzTruncate(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, 2+i)
	}
	f.Fuzz(func(t *testing.T, markup string, limit int) {
		if limit < MinLimit || limit > 64 {
			limit = MinLimit + (limit%63+63)%63
		}
		out, err := Truncate(markup, limit)
		if err != nil {
			t.Fatal(err)
		}
		if p := Check(out); p != nil {
			t.Fatalf("Check(%q) = %v", out, p)
		}
		txt := Text(out)
		if n := Len(txt); n > limit {
			t.Fatalf("Truncate(%q, %d) = %q: visible length %d", markup, limit, out, n)
		}
		orig := Text(markup)
		if txt != orig {
			cut, ok := strings.CutSuffix(txt, Ellipsis)
			if !ok || !strings.HasPrefix(orig, cut) {
				t.Fatalf("Truncate(%q, %d) text %q is not a prefix of %q plus ellipsis", markup, limit, txt, orig)
			}
		}
	})
}

// FuzzTruncateText checks that a cut plain text fits the limit, ends with
// the ellipsis, is a prefix of the input, and never splits a rune.
func FuzzTruncateText(f *testing.F) {
	f.Add("hello", 3)
	f.Add(strings.Repeat("😀", 10), 5)
	f.Add("a\xffb", 2)
	f.Add("😀", 1)
	f.Add("abc", 0)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit > 1<<16 {
			return
		}
		out := TruncateText(s, limit)
		if Len(out) > max(limit, 0) {
			t.Fatalf("TruncateText(%q, %d) = %q: %d units", s, limit, out, Len(out))
		}
		if Len(s) <= limit && out != s {
			t.Fatalf("TruncateText(%q, %d) = %q, want it unchanged", s, limit, out)
		}
		if out == s || out == "" {
			return
		}
		kept, ok := strings.CutSuffix(out, Ellipsis)
		if !ok || !strings.HasPrefix(s, kept) {
			t.Fatalf("TruncateText(%q, %d) = %q: not a prefix plus the ellipsis", s, limit, out)
		}
		if rest := s[len(kept):]; rest != "" && !utf8.RuneStart(rest[0]) {
			t.Fatalf("TruncateText(%q, %d) = %q: cut inside a rune", s, limit, out)
		}
	})
}
