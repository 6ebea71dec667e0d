package tghtml

import (
	"fmt"
	"strings"
)

// ProblemKind names why Telegram would refuse markup.
type ProblemKind string

// The kinds of [Problem].
const (
	// ProblemBareCharacter is a bare <, > or &, or an entity Telegram does
	// not support (such as &apos; or &nbsp;).
	ProblemBareCharacter ProblemKind = "bare-character"
	// ProblemUnsupportedTag is a tag outside Telegram's subset.
	ProblemUnsupportedTag ProblemKind = "unsupported-tag"
	// ProblemUnmatchedEndTag is an end tag that does not close the innermost
	// open tag.
	ProblemUnmatchedEndTag ProblemKind = "unmatched-end-tag"
	// ProblemUnclosedTag is a tag still open at the end of the markup.
	ProblemUnclosedTag ProblemKind = "unclosed-tag"
)

// Problem is the first reason Telegram would refuse markup, as found by
// [Check]. It implements error.
type Problem struct {
	Kind       ProblemKind
	Tag        string // the tag concerned (lower-cased), or "" for a bare character
	Offset     int    // byte offset of the offending token in the markup (its length for unclosed-tag)
	TextBefore string // the visible text up to the problem
}

// Error describes the problem.
func (p *Problem) Error() string {
	if p.Tag != "" {
		return fmt.Sprintf("tghtml: %s <%s> at byte %d", p.Kind, p.Tag, p.Offset)
	}
	return fmt.Sprintf("tghtml: %s at byte %d", p.Kind, p.Offset)
}

// checkTags are the tag names Telegram accepts.
var checkTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "span": true, "tg-spoiler": true,
	"code": true, "pre": true, "a": true, "blockquote": true, "tg-emoji": true,
	"tg-time": true,
}

// Check returns nil when Telegram would accept markup, else the first
// problem. Unlike [Parse] it repairs nothing; it is meant to warn a person
// where Telegram would refuse their text. It checks characters, entities,
// tag names and tag matching, not attributes or nesting.
func Check(markup string) *Problem {
	var text strings.Builder
	type open struct {
		name string
		off  int
	}
	var stack []open
	for _, t := range tokenize(markup) {
		switch t.kind {
		case tokText:
			text.WriteString(t.text)
		case tokEntity:
			if !t.strictOK {
				return &Problem{Kind: ProblemBareCharacter, Offset: t.off, TextBefore: text.String()}
			}
			text.WriteString(t.text)
		case tokBare:
			return &Problem{Kind: ProblemBareCharacter, Offset: t.off, TextBefore: text.String()}
		case tokStartTag:
			if !checkTags[t.name] {
				return &Problem{Kind: ProblemUnsupportedTag, Tag: t.name, Offset: t.off, TextBefore: text.String()}
			}
			if !t.selfClosing {
				stack = append(stack, open{t.name, t.off})
			}
		case tokEndTag:
			if !checkTags[t.name] {
				return &Problem{Kind: ProblemUnsupportedTag, Tag: t.name, Offset: t.off, TextBefore: text.String()}
			}
			if len(stack) == 0 || stack[len(stack)-1].name != t.name {
				return &Problem{Kind: ProblemUnmatchedEndTag, Tag: t.name, Offset: t.off, TextBefore: text.String()}
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		o := stack[len(stack)-1]
		return &Problem{Kind: ProblemUnclosedTag, Tag: o.name, Offset: len(markup), TextBefore: text.String()}
	}
	return nil
}
