package tghtml

import (
	"strings"
	"unicode/utf8"
)

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\"", "&quot;")

// Escape returns s with &, <, > and " replaced by entities, so that it can be
// interpolated into Telegram HTML as text or as a double-quoted attribute.
func Escape(s string) string { return escaper.Replace(s) }

// Render returns canonical markup that Telegram parses into exactly nodes:
// double-quoted, escaped attributes, and a pre with a language written as
// <pre><code class="language-X">…</code></pre>. A node whose Tag is not one
// of the subset's elements contributes only its children. The result always
// passes [Check].
func Render(nodes []Node) string {
	var b strings.Builder
	render(&b, nodes)
	return b.String()
}

func render(b *strings.Builder, nodes []Node) {
	for i := range nodes {
		n := &nodes[i]
		if n.Tag == TagText {
			b.WriteString(Escape(n.Text))
			continue
		}
		if !isElement(n.Tag) {
			render(b, n.Children)
			continue
		}
		b.WriteByte('<')
		b.WriteString(string(n.Tag))
		switch n.Tag {
		case TagLink:
			writeAttr(b, "href", n.Href)
		case TagBlockquote:
			if n.Expandable {
				b.WriteString(" expandable")
			}
		case TagEmoji:
			writeAttr(b, "emoji-id", n.EmojiID)
		case TagTime:
			writeAttr(b, "unix", n.Unix)
			if n.Format != "" {
				writeAttr(b, "format", n.Format)
			}
		}
		b.WriteByte('>')
		if n.Tag == TagPre && n.Language != "" {
			b.WriteString(`<code class="language-`)
			b.WriteString(Escape(n.Language))
			b.WriteString(`">`)
			render(b, n.Children)
			b.WriteString("</code></pre>")
			continue
		}
		render(b, n.Children)
		b.WriteString("</")
		b.WriteString(string(n.Tag))
		b.WriteByte('>')
	}
}

func writeAttr(b *strings.Builder, name, value string) {
	b.WriteByte(' ')
	b.WriteString(name)
	b.WriteString(`="`)
	b.WriteString(Escape(value))
	b.WriteByte('"')
}

// Sanitize returns the canonical markup of [Parse](markup): any input becomes
// markup Telegram accepts, unknown tags becoming text.
func Sanitize(markup string) string { return Render(Parse(markup)) }

// Text returns the visible text of markup as a reader sees it, after
// [Parse]. Message limits are counted on it.
func Text(markup string) string { return string(textOf(nil, Parse(markup))) }

// Len returns the length of s in UTF-16 code units, the unit in which
// Telegram counts message limits and entity offsets. Each invalid UTF-8 byte
// counts as one unit (it would be sent as U+FFFD).
func Len(s string) int {
	n := 0
	for _, r := range s {
		n += runeLen16(r)
	}
	return n
}

// runeLen16 is the UTF-16 length of r: 2 above the basic multilingual plane,
// else 1 (U+FFFD for invalid runes).
func runeLen16(r rune) int {
	if r >= 0x10000 && r <= utf8.MaxRune {
		return 2
	}
	return 1
}
