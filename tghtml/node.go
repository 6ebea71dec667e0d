package tghtml

// Tag names an element of Telegram's HTML subset. The zero value names a text
// node. Only the constants below are elements; [Render] renders the children
// of a node with any other tag and drops the tag itself.
type Tag string

// The tags of Telegram's HTML subset, in their canonical (rendered) form.
// Aliases accepted by [Parse] (strong, em, ins, strike, del, span class
// "tg-spoiler") are mapped onto these.
const (
	TagText       Tag = ""           // a text node, not an element
	TagBold       Tag = "b"          // bold; input aliases: strong
	TagItalic     Tag = "i"          // italic; input aliases: em
	TagUnderline  Tag = "u"          // underline; input aliases: ins
	TagStrike     Tag = "s"          // strikethrough; input aliases: strike, del
	TagSpoiler    Tag = "tg-spoiler" // spoiler; input alias: span class="tg-spoiler"
	TagCode       Tag = "code"       // inline code; holds text only
	TagPre        Tag = "pre"        // preformatted block; holds text only; Language optional
	TagLink       Tag = "a"          // link; Href required
	TagBlockquote Tag = "blockquote" // quotation; Expandable optional
	TagEmoji      Tag = "tg-emoji"   // custom emoji; EmojiID required; atomic
	TagTime       Tag = "tg-time"    // formatted date; Unix required, Format optional; atomic
)

// Message limits, counted by Telegram on the visible text after parsing, in
// UTF-16 code units (see [Len]).
const (
	// TextLimit is the longest visible text of a message.
	TextLimit = 4096
	// CaptionLimit is the longest visible text of a media caption.
	CaptionLimit = 1024
)

// Node is one node of a parsed message: a text node (Tag is [TagText], Text
// holds decoded, unescaped text) or an element (Tag is one of the Tag
// constants, Children its content, and the attribute fields that belong to
// its tag set). Fields that do not belong to the node's tag are ignored by
// [Render].
//
// A tree returned by [Parse] keeps Telegram's rules: styles nest freely,
// other elements open only where all their ancestors are styles, code, pre,
// tg-emoji and tg-time hold text only, no element is empty and no two text
// nodes are adjacent.
type Node struct {
	Tag  Tag
	Text string // text node content (decoded)

	Href       string // TagLink: the URL (http, https, tg or mailto)
	Language   string // TagPre: the code language, or "" for none
	Expandable bool   // TagBlockquote: an expandable quotation
	EmojiID    string // TagEmoji: 1–32 digits
	Unix       string // TagTime: 1–12 digits, seconds since the epoch
	Format     string // TagTime: "r" or w?[dD]?[tT]?, or "" for none

	Children []Node
}

// isStyle reports whether t is a style that may contain and be contained by
// anything except a text-only element.
func isStyle(t Tag) bool {
	switch t {
	case TagBold, TagItalic, TagUnderline, TagStrike, TagSpoiler:
		return true
	}
	return false
}

// holdsOnlyText reports whether no element may open inside t.
func holdsOnlyText(t Tag) bool {
	switch t {
	case TagCode, TagPre, TagEmoji, TagTime:
		return true
	}
	return false
}

// isAtomic reports whether an element of tag t must never be cut.
func isAtomic(t Tag) bool { return t == TagEmoji || t == TagTime }

// isElement reports whether t is one of the subset's elements.
func isElement(t Tag) bool {
	switch t {
	case TagBold, TagItalic, TagUnderline, TagStrike, TagSpoiler, TagCode, TagPre,
		TagLink, TagBlockquote, TagEmoji, TagTime:
		return true
	}
	return false
}

// textOf appends the visible text of nodes to b.
func textOf(b []byte, nodes []Node) []byte {
	for i := range nodes {
		if nodes[i].Tag == TagText {
			b = append(b, nodes[i].Text...)
		} else {
			b = textOf(b, nodes[i].Children)
		}
	}
	return b
}
