package tghtml

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// Attribute bounds of the subset.
const (
	maxLanguageLen = 64 // pre language: 1–64 of [A-Za-z0-9_+#.-]
	maxEmojiIDLen  = 32 // tg-emoji emoji-id: 1–32 digits
	maxUnixLen     = 12 // tg-time unix: 1–12 digits
)

// blockBreaks gives the line breaks a block-level tag asks for around it.
var blockBreaks = map[string]int{
	"p": 2, "h1": 2, "h2": 2, "h3": 2, "h4": 2, "h5": 2, "h6": 2,
	"div": 1, "li": 1, "ul": 1, "ol": 1, "tr": 1, "table": 1,
	"section": 1, "article": 1, "header": 1, "footer": 1,
}

// voidTags never have content or an end tag.
var voidTags = map[string]bool{
	"br": true, "img": true, "hr": true, "input": true, "meta": true, "link": true,
	"wbr": true, "area": true, "base": true, "col": true, "embed": true,
	"source": true, "track": true, "param": true,
}

// frame is one open tag while building the tree. A dropped frame stands for
// a tag that is not kept (unknown, invalid or not allowed there); it only
// lets its end tag be matched, and its content goes to the nearest kept
// frame below it.
type frame struct {
	raw     string // the tag name as written (lower-cased)
	node    Node   // the element (kept frames)
	kids    []Node // children built so far (kept frames)
	dropped bool
	kept    int // index of the nearest kept frame at or below this one
}

// builder holds the state of one Parse.
type builder struct {
	stack []frame        // stack[0] is the root
	open  map[string]int // open frames per raw name, so stray end tags cost O(1)
	// kept frames that hold only text, and that are not styles: with these
	// counts, nesting is decided in O(1) however deep the stack.
	textOnly, nonStyle int
	emitted            bool // some visible text has been emitted
	trailNL            int  // newlines at the end of the visible text so far
	pending            int  // line breaks owed before the next content
}

// Parse reads any markup leniently and returns a tree that keeps Telegram's
// rules (see [Node]). It never fails:
//
//   - strong, em, ins, strike, del and span class="tg-spoiler" become their
//     canonical tags; any other span, unknown tags (script, img, table, …),
//     tags opened where the nesting rules forbid them and tags whose required
//     attributes are missing or invalid are dropped, and their text is kept
//     (script and style bodies therefore become visible words);
//   - p and h1–h6 ask for a paragraph break, div, li, ul, ol, tr, table,
//     section, article, header and footer for a line break, br adds one; no
//     break is added at the start or the end;
//   - an end tag closes the element it names and everything open inside it;
//     a stray end tag is ignored; elements left open are closed at the end;
//   - a bare '<', '>' or '&', and anything that is not a well-formed tag or
//     entity, is literal text; entities are decoded (&amp; &lt; &gt; &quot;
//     &apos; &nbsp; and numeric ones of valid code points);
//   - empty elements are removed, adjacent text nodes merged and invalid
//     UTF-8 replaced by U+FFFD.
func Parse(markup string) []Node {
	markup = strings.ToValidUTF8(markup, "\uFFFD")
	b := &builder{stack: []frame{{}}, open: map[string]int{}}
	var run strings.Builder // consecutive text tokens, added at once
	for _, t := range tokenize(markup) {
		if t.kind == tokText || t.kind == tokEntity || t.kind == tokBare {
			run.WriteString(t.text)
			continue
		}
		b.text(run.String())
		run.Reset()
		switch t.kind {
		case tokStartTag:
			b.start(t)
		case tokEndTag:
			b.end(t.name)
		}
	}
	b.text(run.String())
	for len(b.stack) > 1 {
		b.pop()
	}
	return b.stack[0].kids
}

// top returns the nearest kept frame.
func (b *builder) top() *frame { return &b.stack[b.stack[len(b.stack)-1].kept] }

// mayOpen reports whether an element of tag t may open here: a style may
// open anywhere except under a text-only element; any other element only
// where every kept ancestor is a style.
func (b *builder) mayOpen(t Tag) bool {
	return b.textOnly == 0 && (isStyle(t) || b.nonStyle == 0)
}

// push opens a frame.
func (b *builder) push(f frame) {
	f.kept = b.stack[len(b.stack)-1].kept
	if !f.dropped {
		f.kept = len(b.stack)
		b.count(f.node.Tag, 1)
	}
	b.open[f.raw]++
	b.stack = append(b.stack, f)
}

func (b *builder) count(t Tag, d int) {
	if holdsOnlyText(t) {
		b.textOnly += d
	}
	if !isStyle(t) {
		b.nonStyle += d
	}
}

// appendText adds s to the kids of f, merging with a preceding text node.
func appendText(f *frame, s string) {
	if n := len(f.kids); n > 0 && f.kids[n-1].Tag == TagText {
		f.kids[n-1].Text += s
		return
	}
	f.kids = append(f.kids, Node{Text: s})
}

// flushBreaks emits the owed line breaks into the current parent, if there is
// content before them.
func (b *builder) flushBreaks() {
	if b.pending > 0 && b.emitted {
		appendText(b.top(), strings.Repeat("\n", b.pending))
		b.trailNL += b.pending
	}
	b.pending = 0
}

func (b *builder) text(s string) {
	if s == "" {
		return
	}
	b.flushBreaks()
	appendText(b.top(), s)
	b.emitted = true
	t := strings.TrimRight(s, "\n")
	if t == "" {
		b.trailNL += len(s)
	} else {
		b.trailNL = len(s) - len(t)
	}
}

// askBreaks records that a block tag wants at least n newlines.
func (b *builder) askBreaks(n int) {
	b.pending = max(b.pending, n-b.trailNL)
}

func (b *builder) start(t token) {
	if n, ok := blockBreaks[t.name]; ok {
		b.askBreaks(n)
	}
	if t.name == "br" {
		b.pending++
		return
	}
	if voidTags[t.name] || t.selfClosing {
		return
	}
	f := frame{raw: t.name, dropped: true}
	if parent := b.top(); parent.node.Tag == TagPre && t.name == "code" {
		// The inner code of a pre only carries its language.
		if len(parent.kids) == 0 && parent.node.Language == "" {
			parent.node.Language = languageOf(t.attrs)
		}
		b.push(f)
		return
	}
	if n, ok := element(t); ok && b.mayOpen(n.Tag) {
		b.flushBreaks()
		f.node, f.dropped = n, false
	}
	b.push(f)
}

func (b *builder) end(name string) {
	if n, ok := blockBreaks[name]; ok {
		defer b.askBreaks(n)
	}
	if b.open[name] == 0 {
		return
	}
	for i := len(b.stack) - 1; i > 0; i-- {
		if b.stack[i].raw == name {
			for len(b.stack) > i {
				b.pop()
			}
			return
		}
	}
}

// pop closes the innermost frame, moving a non-empty kept element into its
// parent.
func (b *builder) pop() {
	f := b.stack[len(b.stack)-1]
	b.stack = b.stack[:len(b.stack)-1]
	b.open[f.raw]--
	if f.dropped {
		return
	}
	b.count(f.node.Tag, -1)
	if !hasText(f.kids) {
		return
	}
	f.node.Children = f.kids
	parent := b.top()
	parent.kids = append(parent.kids, f.node)
}

// attrValue returns the value of the named attribute.
func attrValue(attrs []attr, name string) (string, bool) {
	for _, a := range attrs {
		if a.name == name {
			return a.value, true
		}
	}
	return "", false
}

// element maps a start tag onto a kept element, or reports false when the
// tag is not kept.
func element(t token) (Node, bool) {
	switch t.name {
	case "b", "strong":
		return Node{Tag: TagBold}, true
	case "i", "em":
		return Node{Tag: TagItalic}, true
	case "u", "ins":
		return Node{Tag: TagUnderline}, true
	case "s", "strike", "del":
		return Node{Tag: TagStrike}, true
	case "tg-spoiler":
		return Node{Tag: TagSpoiler}, true
	case "span":
		class, _ := attrValue(t.attrs, "class")
		for _, c := range strings.Fields(class) {
			if c == "tg-spoiler" {
				return Node{Tag: TagSpoiler}, true
			}
		}
	case "code":
		return Node{Tag: TagCode}, true
	case "pre":
		return Node{Tag: TagPre}, true
	case "a":
		href, _ := attrValue(t.attrs, "href")
		if validHref(href) {
			return Node{Tag: TagLink, Href: href}, true
		}
	case "blockquote":
		_, exp := attrValue(t.attrs, "expandable")
		return Node{Tag: TagBlockquote, Expandable: exp}, true
	case "tg-emoji":
		id, _ := attrValue(t.attrs, "emoji-id")
		if allDigits(id, maxEmojiIDLen) {
			return Node{Tag: TagEmoji, EmojiID: id}, true
		}
	case "tg-time":
		unix, _ := attrValue(t.attrs, "unix")
		if allDigits(unix, maxUnixLen) {
			format, _ := attrValue(t.attrs, "format")
			if !validTimeFormat(format) {
				format = ""
			}
			return Node{Tag: TagTime, Unix: unix, Format: format}, true
		}
	}
	return Node{}, false
}

// validHref reports whether href parses as a URL with scheme http, https, tg
// or mailto.
func validHref(href string) bool {
	if href == "" || !utf8.ValidString(href) {
		return false
	}
	u, err := url.Parse(href)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "tg", "mailto":
		return true
	}
	return false
}

func allDigits(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validTimeFormat reports whether f is "r" or matches w?[dD]?[tT]? (and is
// not empty).
func validTimeFormat(f string) bool {
	if f == "r" {
		return true
	}
	rest := strings.TrimPrefix(f, "w")
	if rest != "" && (rest[0] == 'd' || rest[0] == 'D') {
		rest = rest[1:]
	}
	if rest != "" && (rest[0] == 't' || rest[0] == 'T') {
		rest = rest[1:]
	}
	return f != "" && rest == ""
}

// languageOf reads the language of class="language-X" (1–64 characters of
// letters, digits, _ + # . -), or "".
func languageOf(attrs []attr) string {
	class, _ := attrValue(attrs, "class")
	for _, c := range strings.Fields(class) {
		lang, ok := strings.CutPrefix(c, "language-")
		if ok && validLanguage(lang) {
			return lang
		}
	}
	return ""
}

func validLanguage(s string) bool {
	if len(s) == 0 || len(s) > maxLanguageLen {
		return false
	}
	for _, c := range []byte(s) {
		if !(isLetter(c) || (c >= '0' && c <= '9') || strings.IndexByte("_+#.-", c) >= 0) {
			return false
		}
	}
	return true
}

// hasText reports whether kids built by the builder hold visible text. An
// element kid always does, since empty elements are never kept.
func hasText(kids []Node) bool {
	for i := range kids {
		if kids[i].Tag != TagText || kids[i].Text != "" {
			return true
		}
	}
	return false
}
