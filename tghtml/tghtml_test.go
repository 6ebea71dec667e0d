package tghtml

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	got := Escape(`<a href="x">&'</a>`)
	want := `&lt;a href=&quot;x&quot;&gt;&amp;'&lt;/a&gt;`
	if got != want {
		t.Fatalf("Escape = %q, want %q", got, want)
	}
}

func TestLen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    string
		want int
	}{
		{"empty", "", 0},
		{"ascii", "hello", 5},
		{"two-byte utf8", "é", 1},
		{"bmp cjk", "日本", 2},
		{"astral emoji is a surrogate pair", "👍", 2},
		{"mixed", "a👍b", 4},
		{"invalid byte counts one", "a\xffb", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Len(tt.s); got != tt.want {
				t.Fatalf("Len(%q) = %d, want %d", tt.s, got, tt.want)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain text", "hello", "hello"},
		{"aliases map to canonical tags", "<strong>a</strong><em>b</em><ins>c</ins><strike>d</strike><del>e</del>", "<b>a</b><i>b</i><u>c</u><s>d</s><s>e</s>"},
		{"tag names are case-insensitive", "<B>x</B>", "<b>x</b>"},
		{"spoiler span", `<span class="x tg-spoiler">s</span>`, "<tg-spoiler>s</tg-spoiler>"},
		{"other span dropped, words kept", `<span class="x">s</span>`, "s"},
		{"tg-spoiler tag", "<tg-spoiler>s</tg-spoiler>", "<tg-spoiler>s</tg-spoiler>"},
		{"unknown tag keeps text", "<script>alert(1)</script>", "alert(1)"},
		{"bare characters escaped", "a < b > c & d", "a &lt; b &gt; c &amp; d"},
		{"comment becomes text", "<!-- c -->", "&lt;!-- c --&gt;"},
		{"named entities decoded", "&amp;&lt;&gt;&quot;&apos;&nbsp;", "&amp;&lt;&gt;&quot;'\u00a0"},
		{"numeric entities", "&#65;&#x42;&#128077;", "AB👍"},
		{"invalid numeric entity stays text", "&#0;&#xD800;&#x110000;&#12345678;", "&amp;#0;&amp;#xD800;&amp;#x110000;&amp;#12345678;"},
		{"unknown named entity stays text", "&copy;", "&amp;copy;"},
		{"link kept", `<a href="https://example.com/?a=1&amp;b=2">x</a>`, `<a href="https://example.com/?a=1&amp;b=2">x</a>`},
		{"tg and mailto links", `<a href="tg://user?id=1">u</a><a href="mailto:a@b.c">m</a>`, `<a href="tg://user?id=1">u</a><a href="mailto:a@b.c">m</a>`},
		{"javascript link dropped", `<a href="javascript:alert(1)">x</a>`, "x"},
		{"link without href dropped", `<a>x</a>`, "x"},
		{"relative link dropped", `<a href="/path">x</a>`, "x"},
		{"unquoted attribute", `<a href=https://e.com>x</a>`, `<a href="https://e.com">x</a>`},
		{"single-quoted attribute", `<a href='https://e.com'>x</a>`, `<a href="https://e.com">x</a>`},
		{"pre with language", `<pre><code class="language-go">x := 1</code></pre>`, `<pre><code class="language-go">x := 1</code></pre>`},
		{"pre with invalid language", `<pre><code class="language-a$b">x</code></pre>`, `<pre>x</pre>`},
		{"pre language too long", `<pre><code class="language-` + strings.Repeat("a", 65) + `">x</code></pre>`, `<pre>x</pre>`},
		{"pre language after text ignored", `<pre>a<code class="language-go">x</code></pre>`, `<pre>ax</pre>`},
		{"code holds only text", "<code><b>x</b></code>", "<code>x</code>"},
		{"pre holds only text", "<pre><i>x</i></pre>", "<pre>x</pre>"},
		{"styles nest", "<b><i><u><s>x</s></u></i></b>", "<b><i><u><s>x</s></u></i></b>"},
		{"code inside style", "<b><code>x</code></b>", "<b><code>x</code></b>"},
		{"no blockquote in blockquote", "<blockquote>a<blockquote>b</blockquote></blockquote>", "<blockquote>ab</blockquote>"},
		{"no link in link", `<a href="http://a">x<a href="http://b">y</a></a>`, `<a href="http://a">xy</a>`},
		{"no code in link", `<a href="http://a"><code>x</code></a>`, `<a href="http://a">x</a>`},
		{"no link in blockquote", `<blockquote><a href="http://a">x</a></blockquote>`, `<blockquote>x</blockquote>`},
		{"link in style", `<b><a href="http://a">x</a></b>`, `<b><a href="http://a">x</a></b>`},
		{"expandable blockquote", "<blockquote expandable>q</blockquote>", "<blockquote expandable>q</blockquote>"},
		{"emoji", `<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>`, `<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>`},
		{"emoji id not digits", `<tg-emoji emoji-id="x1">👍</tg-emoji>`, "👍"},
		{"emoji id too long", `<tg-emoji emoji-id="` + strings.Repeat("1", 33) + `">👍</tg-emoji>`, "👍"},
		{"time with format", `<tg-time unix="1700000000" format="wDT">t</tg-time>`, `<tg-time unix="1700000000" format="wDT">t</tg-time>`},
		{"time relative format", `<tg-time unix="1" format="r">t</tg-time>`, `<tg-time unix="1" format="r">t</tg-time>`},
		{"time bad format dropped", `<tg-time unix="1" format="x">t</tg-time>`, `<tg-time unix="1">t</tg-time>`},
		{"time without unix dropped", `<tg-time>t</tg-time>`, "t"},
		{"time unix too long", `<tg-time unix="1234567890123">t</tg-time>`, "t"},
		{"empty elements removed", "<b></b><i><u></u></i>x", "x"},
		{"whitespace element kept", "<b> </b>", "<b> </b>"},
		{"unclosed closed at end", "<b>x<i>y", "<b>x<i>y</i></b>"},
		{"end tag closes inner elements", "<b>x<i>y</b>z", "<b>x<i>y</i></b>z"},
		{"stray end tag ignored", "x</b>y", "xy"},
		{"alias end tag matches as written", "<strong>x</strong>y", "<b>x</b>y"},
		{"paragraphs", "<p>a</p><p>b</p>", "a\n\nb"},
		{"no break at start or end", "<div>a</div>", "a"},
		{"div lines", "<div>a</div><div>b</div>", "a\nb"},
		{"br cumulative", "a<br><br>b", "a\n\nb"},
		{"br self-closing", "a<br/>b", "a\nb"},
		{"block counts existing newlines", "a\n<p>b</p>", "a\n\nb"},
		{"heading", "<h1>T</h1>body", "T\n\nbody"},
		{"breaks go before the element", "a<p><b>b</b></p>", "a\n\n<b>b</b>"},
		{"list", "<ul><li>a</li><li>b</li></ul>", "a\nb"},
		{"invalid utf8 replaced", "a\xffb", "a\uFFFDb"},
		{"unterminated tag is text", "<b", "&lt;b"},
		{"attribute without space is not a tag", `<a href="x"y>`, `&lt;a href=&quot;x&quot;y&gt;`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Sanitize(tt.in); got != tt.want {
				t.Fatalf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if p := Check(Sanitize(tt.in)); p != nil {
				t.Fatalf("Check(Sanitize(%q)) = %v", tt.in, p)
			}
		})
	}
}

func TestParseTree(t *testing.T) {
	t.Parallel()
	got := Parse(`a<b>b<a href="https://x">c</a></b><pre><code class="language-go">d</code></pre>`)
	want := []Node{
		{Text: "a"},
		{Tag: TagBold, Children: []Node{{Text: "b"}, {Tag: TagLink, Href: "https://x", Children: []Node{{Text: "c"}}}}},
		{Tag: TagPre, Language: "go", Children: []Node{{Text: "d"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse = %#v\nwant %#v", got, want)
	}
}

func TestRenderUnknownTagRendersChildren(t *testing.T) {
	t.Parallel()
	got := Render([]Node{{Tag: "script", Children: []Node{{Text: "<x>"}}}, {Tag: TagText, Text: "y", Children: []Node{{Text: "ignored"}}}})
	if got != "&lt;x&gt;y" {
		t.Fatalf("Render = %q", got)
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	if got := Text("<b>a &amp; <i>b</i></b><p>c</p>"); got != "a & b\n\nc" {
		t.Fatalf("Text = %q", got)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want *Problem
	}{
		{"valid", `<b>a</b> &amp; <a href="x">l</a><pre><code class="language-go">x</code></pre>`, nil},
		{"numeric entity ok", "&#65;&#x42;", nil},
		{"span accepted", `<span class="whatever">x</span>`, nil},
		{"bare lt", "a < b", &Problem{Kind: ProblemBareCharacter, Offset: 2, TextBefore: "a "}},
		{"bare gt", "a > b", &Problem{Kind: ProblemBareCharacter, Offset: 2, TextBefore: "a "}},
		{"bare amp", "<b>x</b> & y", &Problem{Kind: ProblemBareCharacter, Offset: 9, TextBefore: "x "}},
		{"apos refused", "it&apos;s", &Problem{Kind: ProblemBareCharacter, Offset: 2, TextBefore: "it"}},
		{"nbsp refused", "a&nbsp;", &Problem{Kind: ProblemBareCharacter, Offset: 1, TextBefore: "a"}},
		{"unsupported tag", "x<p>y</p>", &Problem{Kind: ProblemUnsupportedTag, Tag: "p", Offset: 1, TextBefore: "x"}},
		{"unsupported br", "x<br>", &Problem{Kind: ProblemUnsupportedTag, Tag: "br", Offset: 1, TextBefore: "x"}},
		{"unmatched end", "<b>x</i>", &Problem{Kind: ProblemUnmatchedEndTag, Tag: "i", Offset: 4, TextBefore: "x"}},
		{"stray end", "x</b>", &Problem{Kind: ProblemUnmatchedEndTag, Tag: "b", Offset: 1, TextBefore: "x"}},
		{"crossed", "<b><i>x</b></i>", &Problem{Kind: ProblemUnmatchedEndTag, Tag: "b", Offset: 7, TextBefore: "x"}},
		{"unclosed", "<b>x &lt;", &Problem{Kind: ProblemUnclosedTag, Tag: "b", Offset: 9, TextBefore: "x <"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Check(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Check(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if got != nil && !strings.HasPrefix(got.Error(), "tghtml: "+string(tt.want.Kind)) {
				t.Fatalf("Error() = %q", got.Error())
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"fits returns canonical", "<strong>hi</strong>", 10, "<b>hi</b>"},
		{"exactly at limit", "abcde", 5, "abcde"},
		{"cut at whitespace closes tag", "<b>hello world</b>", 8, "<b>hello</b>…"},
		{"no whitespace hard cut", "abcdefghij", 5, "abcd…"},
		{"trailing whitespace trimmed", "ab   cdefgh", 6, "ab…"},
		{"surrogate pair never split", "👍👍👍", 4, "👍…"},
		{"emoji element never cut", `ab<tg-emoji emoji-id="1">xyz</tg-emoji>cd`, 5, "ab…"},
		{"limit 2", "abc", 2, "a…"},
		{"entities escaped", "a&amp;b c&lt;d", 5, "a&amp;b…"},
		{"nested tags closed", "<b>ab <i>cd ef</i></b>", 7, "<b>ab <i>cd</i></b>…"},
		{"atomic longer than room keeps text", `<tg-emoji emoji-id="1">abcdef</tg-emoji>`, 4, "abc…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Truncate(tt.in, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Truncate(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
			}
			if n := Len(Text(got)); n > tt.limit {
				t.Fatalf("visible length %d > %d", n, tt.limit)
			}
		})
	}
}

func TestLimitTooSmall(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 0, -5} {
		if _, err := Truncate("abc", limit); !errors.Is(err, ErrLimit) {
			t.Errorf("Truncate limit %d: err = %v, want ErrLimit", limit, err)
		}
		if _, err := Split("abc", limit); !errors.Is(err, ErrLimit) {
			t.Errorf("Split limit %d: err = %v, want ErrLimit", limit, err)
		}
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"fits one part", "<b>hi</b>", 10, []string{"<b>hi</b>"}},
		{"nothing visible", "<b></b>  \n", 10, nil},
		{"paragraph break preferred", "aa bb\ncc\n\ndd ee", 12, []string{"aa bb\ncc", "dd ee"}},
		{"line break before space", "aa bb\ncc dd", 10, []string{"aa bb", "cc dd"}},
		{"space", "aaa bbb ccc", 8, []string{"aaa bbb", "ccc"}},
		{"hard cut", "abcdefgh", 3, []string{"abc", "def", "gh"}},
		{"surrogate pair", "👍👍👍", 3, []string{"👍", "👍", "👍"}},
		{"tags reopened", "<b>aaa bbb</b>", 4, []string{"<b>aaa</b>", "<b>bbb</b>"}},
		{"link reopened with href", `<a href="http://x">aaa bbb</a>`, 4, []string{`<a href="http://x">aaa</a>`, `<a href="http://x">bbb</a>`}},
		{"pre reopened with language", "<pre><code class=\"language-go\">aaa\nbbb</code></pre>", 4, []string{`<pre><code class="language-go">aaa</code></pre>`, `<pre><code class="language-go">bbb</code></pre>`}},
		{"atomic kept whole", `ab<tg-time unix="1">c d</tg-time>`, 4, []string{"ab", `<tg-time unix="1">c d</tg-time>`}},
		{"whitespace-only parts skipped", "aaa\n\n\n\n\n\nbbb", 3, []string{"aaa", "bbb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Split(tt.in, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Split(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
			}
			checkParts(t, tt.in, tt.limit, got)
		})
	}
}

// checkParts asserts the Split invariants: each part valid and within limit,
// and the parts' visible texts, joined, equal the original visible text up to
// the whitespace dropped at cuts.
func checkParts(t *testing.T, in string, limit int, parts []string) {
	t.Helper()
	var joined strings.Builder
	for i, p := range parts {
		if prob := Check(p); prob != nil {
			t.Fatalf("part %d %q: %v", i, p, prob)
		}
		txt := Text(p)
		if n := Len(txt); n > limit {
			t.Fatalf("part %d %q: visible length %d > limit %d", i, p, n, limit)
		}
		if strings.TrimSpace(txt) == "" {
			t.Fatalf("part %d %q is whitespace-only", i, p)
		}
		joined.WriteString(txt)
	}
	if got, want := stripSpace(joined.String()), stripSpace(Text(in)); got != want {
		t.Fatalf("joined parts text %q != original %q (whitespace removed)", got, want)
	}
}

func stripSpace(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// TestLargeAdversarialInput feeds inputs that would be quadratic in a naive
// tree builder (deep nesting, many stray end tags, many bare characters);
// they must finish and stay valid.
func TestLargeAdversarialInput(t *testing.T) {
	t.Parallel()
	const n = 20_000
	inputs := map[string]string{
		"deep styles":      strings.Repeat("<b>", n) + "x",
		"deep unknown":     strings.Repeat("<x>", n) + "y" + strings.Repeat("</z>", n),
		"bare characters":  strings.Repeat("<", n),
		"many small texts": strings.Repeat("a&amp;", n),
	}
	for name, in := range inputs {
		out := Sanitize(in)
		if p := Check(out); p != nil {
			t.Errorf("%s: %v", name, p)
		}
		if _, err := Split(in, TextLimit); err != nil {
			t.Errorf("%s: Split: %v", name, err)
		}
	}
}

func TestTruncateText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s     string
		limit int
		want  string
	}{
		{"hello", 5, "hello"},
		{"hello", 4, "hel…"},
		{"hello", 1, "…"},
		{"hello", 0, ""},
		{"", 0, ""},
		{"a😀b", 4, "a😀b"},
		{"a😀b", 3, "a…"}, // the emoji is two units: no room for it and the ellipsis
		{"😀😀", 3, "😀…"},
		{"<b>not markup</b>", 6, "<b>no…"},
		{"a\xffbc", 3, "a\xff…"}, // an invalid byte counts as one unit
	}
	for _, tt := range tests {
		if got := TruncateText(tt.s, tt.limit); got != tt.want {
			t.Errorf("TruncateText(%q, %d) = %q, want %q", tt.s, tt.limit, got, tt.want)
		}
	}
}
