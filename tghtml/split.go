package tghtml

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Ellipsis is what [Truncate] appends to a cut text.
const Ellipsis = "…"

// MinLimit is the smallest limit [Split] and [Truncate] accept.
const MinLimit = 2

// ErrLimit is returned (wrapped) by [Split] and [Truncate] for a limit below
// [MinLimit].
var ErrLimit = errors.New("tghtml: limit too small")

// flat is the visible text of a tree as runes, with prefix sums of their
// UTF-16 lengths and the rune ranges of atomic elements.
type flat struct {
	runes  []rune
	pre    []int    // pre[k] = UTF-16 units of runes[:k]
	atomic [][2]int // [start, end) rune ranges of tg-emoji and tg-time
}

func flatten(nodes []Node) *flat {
	f := &flat{}
	f.walk(nodes)
	f.pre = make([]int, len(f.runes)+1)
	for i, r := range f.runes {
		f.pre[i+1] = f.pre[i] + runeLen16(r)
	}
	return f
}

func (f *flat) walk(nodes []Node) {
	for i := range nodes {
		n := &nodes[i]
		if n.Tag == TagText {
			f.runes = append(f.runes, []rune(n.Text)...)
			continue
		}
		start := len(f.runes)
		f.walk(n.Children)
		if isAtomic(n.Tag) {
			f.atomic = append(f.atomic, [2]int{start, len(f.runes)})
		}
	}
}

// allowed reports whether a cut at rune position k keeps atomic elements
// whole.
func (f *flat) allowed(k int) bool {
	for _, a := range f.atomic {
		if a[0] < k && k < a[1] {
			return false
		}
	}
	return true
}

// maxEnd returns the largest k ≥ from with pre[k]-pre[from] ≤ room.
func (f *flat) maxEnd(from, room int) int {
	k := from
	for k < len(f.runes) && f.pre[k+1]-f.pre[from] <= room {
		k++
	}
	return k
}

// lastWhere returns the largest allowed k in (from, end] for which ok(k)
// holds, or -1.
func (f *flat) lastWhere(from, end int, ok func(k int) bool) int {
	for k := end; k > from; k-- {
		if ok(k) && f.allowed(k) {
			return k
		}
	}
	return -1
}

func (f *flat) isSpaceAt(k int) bool { return k < len(f.runes) && unicode.IsSpace(f.runes[k]) }

// slice returns the part of nodes whose visible text lies in runes [a, b),
// keeping the elements around it (so tags cut by the range are closed and
// reopened with their attributes). An atomic element the range cuts keeps
// only its text. pos is the rune position where nodes start; it returns the
// position after them.
func slice(nodes []Node, a, b int, pos *int) []Node {
	var out []Node
	for i := range nodes {
		n := &nodes[i]
		if n.Tag == TagText {
			rs := []rune(n.Text)
			s, e := max(a-*pos, 0), min(b-*pos, len(rs))
			*pos += len(rs)
			if s < e {
				out = appendTextNode(out, string(rs[s:e]))
			}
			continue
		}
		start := *pos
		kids := slice(n.Children, a, b, pos)
		if len(kids) == 0 {
			continue
		}
		if isAtomic(n.Tag) && (start < a || *pos > b) {
			for _, k := range kids {
				out = appendTextNode(out, k.Text)
			}
			continue
		}
		c := *n
		c.Children = kids
		out = append(out, c)
	}
	return out
}

func appendTextNode(out []Node, s string) []Node {
	if n := len(out); n > 0 && out[n-1].Tag == TagText {
		out[n-1].Text += s
		return out
	}
	return append(out, Node{Text: s})
}

func checkLimit(limit int) error {
	if limit < MinLimit {
		return fmt.Errorf("%w: %d (minimum %d)", ErrLimit, limit, MinLimit)
	}
	return nil
}

// Truncate returns markup cut to one part whose visible text, [Ellipsis]
// included, is at most limit UTF-16 units (use [TextLimit] or
// [CaptionLimit]). Markup that fits is returned as its canonical re-render
// ([Sanitize]). Otherwise the text is cut at the last whitespace that fits,
// else at the last position that neither splits a surrogate pair nor falls
// inside a tg-emoji or tg-time, trailing whitespace is trimmed, open tags are
// closed and the ellipsis appended. A limit below [MinLimit] is an error
// wrapping [ErrLimit].
func Truncate(markup string, limit int) (string, error) {
	if err := checkLimit(limit); err != nil {
		return "", err
	}
	nodes := Parse(markup)
	f := flatten(nodes)
	if f.pre[len(f.runes)] <= limit {
		return Render(nodes), nil
	}
	end := f.maxEnd(0, limit-Len(Ellipsis))
	cut := f.lastWhere(0, end, f.isSpaceAt)
	if cut < 0 {
		cut = f.lastWhere(0, end, func(int) bool { return true })
	}
	if cut < 0 {
		cut = end // an atomic element longer than the room: keep its text only
	}
	for cut > 0 && unicode.IsSpace(f.runes[cut-1]) {
		cut--
	}
	pos := 0
	return Render(slice(nodes, 0, cut, &pos)) + Escape(Ellipsis), nil
}

// Split cuts markup into parts that are each valid on their own and whose
// visible text is at most limit UTF-16 units. Markup that fits is one part
// (its canonical re-render); markup with no visible text gives no parts. Each
// cut is the last position within the limit that is, in order of preference,
// a paragraph break, a line break, any whitespace, or any position that
// neither splits a surrogate pair nor falls inside a tg-emoji or tg-time;
// failing all of these (an atomic element longer than the limit) it is a
// hard cut, and that element keeps only its text. The whitespace around a cut is
// dropped, elements open across a cut are closed at the end of one part and
// reopened with their attributes at the start of the next, and
// whitespace-only parts are skipped. A limit below [MinLimit] is an error
// wrapping [ErrLimit].
func Split(markup string, limit int) ([]string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	nodes := Parse(markup)
	f := flatten(nodes)
	if strings.TrimSpace(string(f.runes)) == "" {
		return nil, nil
	}
	if f.pre[len(f.runes)] <= limit {
		return []string{Render(nodes)}, nil
	}
	var parts []string
	for from := 0; from < len(f.runes); {
		cut := len(f.runes)
		if f.pre[cut]-f.pre[from] > limit {
			cut = f.chooseCut(from, f.maxEnd(from, limit))
		}
		end := cut
		for end > from && unicode.IsSpace(f.runes[end-1]) {
			end--
		}
		if end > from {
			pos := 0
			parts = append(parts, Render(slice(nodes, from, end, &pos)))
		}
		from = cut
		for from < len(f.runes) && unicode.IsSpace(f.runes[from]) {
			from++
		}
	}
	return parts, nil
}

// chooseCut picks where the part starting at from ends, given that
// runes[from:end] is the most that fits.
func (f *flat) chooseCut(from, end int) int {
	rules := []func(k int) bool{
		func(k int) bool { return k+1 < len(f.runes) && f.runes[k] == '\n' && f.runes[k+1] == '\n' },
		func(k int) bool { return k < len(f.runes) && f.runes[k] == '\n' },
		f.isSpaceAt,
		func(int) bool { return true },
	}
	for _, ok := range rules {
		if k := f.lastWhere(from, end, ok); k >= 0 {
			return k
		}
	}
	return end
}
