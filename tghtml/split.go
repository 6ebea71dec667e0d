package tghtml

import (
	"errors"
	"fmt"
	"sort"
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
// UTF-16 lengths and, per position, whether a cut there would fall inside an
// atomic element.
type flat struct {
	runes  []rune
	pre    []int  // pre[k] = UTF-16 units of runes[:k]
	inside []bool // inside[k]: position k is strictly inside a tg-emoji or tg-time
	tree   []measured
}

// measured is a node with the rune length of its visible text and the start
// offsets of its children, so a slice can skip what lies outside its range.
type measured struct {
	n      *Node
	length int
	kids   []measured
	starts []int // starts[i] = offset of kids[i] within this node
}

func flatten(nodes []Node) *flat {
	f := &flat{}
	f.tree, _ = f.walk(nodes)
	f.pre = make([]int, len(f.runes)+1)
	for i, r := range f.runes {
		f.pre[i+1] = f.pre[i] + runeLen16(r)
	}
	if f.inside == nil {
		f.inside = make([]bool, len(f.runes)+1)
	}
	return f
}

// walk appends the text of nodes to f.runes, marks the inside of atomic
// elements, and returns the measured nodes and the start offsets.
func (f *flat) walk(nodes []Node) ([]measured, []int) {
	ms := make([]measured, len(nodes))
	starts := make([]int, len(nodes))
	base := len(f.runes)
	for i := range nodes {
		n := &nodes[i]
		start := len(f.runes)
		starts[i] = start - base
		ms[i].n = n
		if n.Tag == TagText {
			f.runes = append(f.runes, []rune(n.Text)...)
		} else {
			ms[i].kids, ms[i].starts = f.walk(n.Children)
			if isAtomic(n.Tag) {
				if f.inside == nil {
					f.inside = make([]bool, 0, 64)
				}
				for len(f.inside) <= len(f.runes) {
					f.inside = append(f.inside, false)
				}
				for k := start + 1; k < len(f.runes); k++ {
					f.inside[k] = true
				}
			}
		}
		ms[i].length = len(f.runes) - start
	}
	return ms, starts
}

// allowed reports whether a cut at rune position k keeps atomic elements
// whole.
func (f *flat) allowed(k int) bool { return k >= len(f.inside) || !f.inside[k] }

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

// slice returns the part of the tree whose visible text lies in runes
// [a, b), keeping the elements around it (so tags cut by the range are
// closed and reopened with their attributes). An atomic element the range
// cuts keeps only its text. base is the rune offset of ms.
func slice(ms []measured, starts []int, base, a, b int) []Node {
	var out []Node
	// Skip the nodes that end before a.
	i := sort.Search(len(ms), func(i int) bool { return base+starts[i]+ms[i].length > a })
	for ; i < len(ms); i++ {
		m := &ms[i]
		pos := base + starts[i]
		if pos >= b {
			break
		}
		if m.n.Tag == TagText {
			rs := []rune(m.n.Text)
			s, e := max(a-pos, 0), min(b-pos, len(rs))
			if s < e {
				out = appendTextNode(out, string(rs[s:e]))
			}
			continue
		}
		kids := slice(m.kids, m.starts, pos, a, b)
		if len(kids) == 0 {
			continue
		}
		if isAtomic(m.n.Tag) && (pos < a || pos+m.length > b) {
			for _, k := range kids {
				out = appendTextNode(out, k.Text)
			}
			continue
		}
		c := *m.n
		c.Children = kids
		out = append(out, c)
	}
	return out
}

// render renders the part of f's tree in runes [a, b).
func (f *flat) render(a, b int) string {
	starts := make([]int, len(f.tree))
	off := 0
	for i := range f.tree {
		starts[i] = off
		off += f.tree[i].length
	}
	return Render(slice(f.tree, starts, 0, a, b))
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
	return f.render(0, cut) + Escape(Ellipsis), nil
}

// TruncateText returns plain text s (not markup) cut to at most limit
// UTF-16 units, [Ellipsis] included, as Telegram counts a message sent
// without a parse mode. Text that fits ([Len](s) <= limit) is returned
// unchanged. Otherwise s is cut at the last rune boundary that leaves room
// for the ellipsis, never splitting a surrogate pair, and the ellipsis is
// appended. A limit below 1 returns the empty string.
func TruncateText(s string, limit int) string {
	if Len(s) <= limit {
		return s
	}
	if limit < 1 {
		return ""
	}
	room, units := limit-Len(Ellipsis), 0
	for i, r := range s {
		if units+runeLen16(r) > room {
			return s[:i] + Ellipsis
		}
		units += runeLen16(r)
	}
	return s
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
			parts = append(parts, f.render(from, end))
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
