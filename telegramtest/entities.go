package telegramtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tgrelay/tgrelay/tghtml"
)

// Entity is a message entity as Telegram reports it: a typed span of the
// plain text, with Offset and Length in UTF-16 code units.
type Entity struct {
	Type          string `json:"type"`
	Offset        int    `json:"offset"`
	Length        int    `json:"length"`
	URL           string `json:"url,omitempty"`
	Language      string `json:"language,omitempty"`
	CustomEmojiID string `json:"custom_emoji_id,omitempty"`
}

// maxEntities is Telegram's limit of entities per message; more are
// dropped, as Telegram drops them.
const maxEntities = 100

// formatText turns text under parseMode into the plain text a reader sees
// and its entities, as Telegram does before storing a message. explicit is
// the entities (or caption_entities) parameter, used when parseMode is
// empty. Entities Telegram detects by itself (bot commands, mentions,
// hashtags, URLs) are added where no code, pre or link covers them.
func formatText(text, parseMode, explicit string) (string, []Entity, *apiError) {
	var (
		plain = text
		ents  []Entity
	)
	if !utf8.ValidString(text) {
		return "", nil, badRequest("text must be encoded in UTF-8")
	}
	mode := strings.ToLower(parseMode)
	if text == "" {
		mode = "" // Telegram reads no parse mode for an empty text or caption
	}
	switch mode {
	case "", "none":
		if strings.TrimSpace(explicit) != "" {
			if err := json.Unmarshal([]byte(explicit), &ents); err != nil {
				return "", nil, badRequest("can't parse entities JSON object")
			}
			n := tghtml.Len(text)
			for _, e := range ents {
				if e.Type == "" || e.Offset < 0 || e.Length < 0 || e.Offset+e.Length > n {
					return "", nil, badRequest("can't parse entities: entity is out of the text")
				}
			}
		}
	case "html":
		if p := tghtml.Check(text); p != nil {
			return "", nil, badRequest("can't parse entities: " + describeProblem(p))
		}
		plain, ents = htmlEntities(tghtml.Parse(text))
	case "markdownv2":
		var err error
		if plain, ents, err = parseMarkdownV2(text); err != nil {
			return "", nil, badRequest("can't parse entities: " + err.Error())
		}
	case "markdown":
		var err error
		if plain, ents, err = parseMarkdown(text); err != nil {
			return "", nil, badRequest("can't parse entities: " + err.Error())
		}
	default:
		return "", nil, badRequest("unsupported parse_mode")
	}
	ents = append(ents, detectEntities(plain, ents)...)
	sortEntities(ents)
	if len(ents) > maxEntities {
		ents = ents[:maxEntities]
	}
	return plain, ents, nil
}

// sortEntities orders entities by offset, an outer entity before the ones
// it contains, as Telegram lists them.
func sortEntities(ents []Entity) {
	slices.SortStableFunc(ents, func(a, b Entity) int {
		if c := cmp.Compare(a.Offset, b.Offset); c != 0 {
			return c
		}
		return cmp.Compare(b.Length, a.Length)
	})
}

// htmlEntities walks a parsed HTML tree into plain text and entities.
func htmlEntities(nodes []tghtml.Node) (string, []Entity) {
	var w entityWriter
	w.html(nodes)
	return w.b.String(), w.ents
}

// entityWriter accumulates plain text and counts it in UTF-16 units.
type entityWriter struct {
	b    strings.Builder
	n    int
	ents []Entity
}

func (w *entityWriter) write(s string) {
	w.b.WriteString(s)
	w.n += tghtml.Len(s)
}

// add records an entity from start to the current end, unless it is empty.
func (w *entityWriter) add(e Entity, start int) {
	if e.Length = w.n - start; e.Length > 0 {
		e.Offset = start
		w.ents = append(w.ents, e)
	}
}

func (w *entityWriter) html(nodes []tghtml.Node) {
	for _, n := range nodes {
		if n.Tag == tghtml.TagText {
			w.write(n.Text)
			continue
		}
		start := w.n
		w.html(n.Children)
		var e Entity
		switch n.Tag {
		case tghtml.TagBold:
			e.Type = "bold"
		case tghtml.TagItalic:
			e.Type = "italic"
		case tghtml.TagUnderline:
			e.Type = "underline"
		case tghtml.TagStrike:
			e.Type = "strikethrough"
		case tghtml.TagSpoiler:
			e.Type = "spoiler"
		case tghtml.TagCode:
			e.Type = "code"
		case tghtml.TagPre:
			e.Type, e.Language = "pre", n.Language
		case tghtml.TagLink:
			e.Type, e.URL = "text_link", n.Href
		case tghtml.TagBlockquote:
			e.Type = "blockquote"
			if n.Expandable {
				e.Type = "expandable_blockquote"
			}
		case tghtml.TagEmoji:
			e.Type, e.CustomEmojiID = "custom_emoji", n.EmojiID
		default:
			continue // tg-time and anything else: text only
		}
		w.add(e, start)
	}
}

// detectable are the entities Telegram finds in plain text by itself.
var detectable = regexp.MustCompile(`(?:^|[\s(])(/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]{3,32})?|@[A-Za-z0-9_]{5,32}|#[\pL\pN_]*\pL[\pL\pN_]*|https?://[^\s<>"]+)`)

// detectEntities returns the bot commands, mentions, hashtags and URLs of
// plain that no code, pre or link entity of have covers.
func detectEntities(plain string, have []Entity) []Entity {
	var out []Entity
	for _, m := range detectable.FindAllStringSubmatchIndex(plain, maxEntities) {
		start, end := m[2], m[3]
		off, length := tghtml.Len(plain[:start]), tghtml.Len(plain[start:end])
		covered := slices.ContainsFunc(have, func(e Entity) bool {
			switch e.Type {
			case "code", "pre", "text_link", "custom_emoji":
				return off < e.Offset+e.Length && e.Offset < off+length
			}
			return false
		})
		if covered {
			continue
		}
		var typ string
		switch plain[start] {
		case '/':
			typ = "bot_command"
		case '@':
			typ = "mention"
		case '#':
			typ = "hashtag"
		default:
			typ = "url"
			// A sentence's full stop or closing bracket is not part of the URL.
			trimmed := strings.TrimRight(plain[start:end], ".,;:!?)")
			length = tghtml.Len(trimmed)
		}
		out = append(out, Entity{Type: typ, Offset: off, Length: length})
	}
	return out
}

// entityNameV2 names an entity type as Telegram's MarkdownV2 errors do.
var entityNameV2 = map[string]string{
	"bold": "Bold", "italic": "Italic", "underline": "Underline", "strikethrough": "Strikethrough",
	"spoiler": "Spoiler", "text_link": "TextUrl", "code": "Code", "pre": "Pre",
	"custom_emoji": "CustomEmoji",
}

// mdFrame is an entity open while parsing Markdown.
type mdFrame struct {
	typ     string
	byteOff int // where it started in the input, for errors
	start   int // where it started in the output, in UTF-16 units
	lang    string
}

// reservedV2 are the characters MarkdownV2 reserves everywhere outside
// code and pre.
const reservedV2 = "_*[]()~`>#+-=|{}.!"

// parseMarkdownV2 parses Telegram's MarkdownV2 into plain text and
// entities, refusing what Telegram refuses with Telegram's words: an
// unescaped reserved character, or an entity left open.
func parseMarkdownV2(in string) (string, []Entity, error) {
	var (
		w     entityWriter
		stack []mdFrame
		// quote is the open blockquote: its start, or -1.
		quote, quoteByte = -1, 0
		expandable       bool
		quoteEnds        bool // an expandable quote's closing || was seen on this line
	)
	top := func() *mdFrame {
		if len(stack) == 0 {
			return nil
		}
		return &stack[len(stack)-1]
	}
	closeQuote := func() {
		if quote < 0 {
			return
		}
		typ := "blockquote"
		if expandable {
			typ = "expandable_blockquote"
		}
		// The quote ends before the line break that ended it.
		end := w.n
		if s := w.b.String(); strings.HasSuffix(s, "\n") {
			end--
		}
		if end > quote {
			w.ents = append(w.ents, Entity{Type: typ, Offset: quote, Length: end - quote})
		}
		quote, expandable, quoteEnds = -1, false, false
	}
	for i := 0; i < len(in); {
		c := in[i]
		t := top()
		inCode := t != nil && (t.typ == "code" || t.typ == "pre")
		if !inCode && (i == 0 || in[i-1] == '\n') {
			if quoteEnds {
				closeQuote()
			}
			switch {
			case strings.HasPrefix(in[i:], "**>") && quote < 0:
				quote, quoteByte, expandable = w.n, i, true
				i += 3
				continue
			case c == '>':
				if quote < 0 {
					quote, quoteByte = w.n, i
				}
				i++
				continue
			case quote >= 0:
				closeQuote()
			}
		}
		if c == '\\' && i+1 < len(in) && in[i+1] >= 1 && in[i+1] <= 126 {
			w.write(in[i+1 : i+2])
			i += 2
			continue
		}
		if inCode {
			switch {
			case t.typ == "code" && c == '`':
				w.add(Entity{Type: "code"}, t.start)
				stack = stack[:len(stack)-1]
				i++
			case t.typ == "pre" && strings.HasPrefix(in[i:], "```"):
				w.add(Entity{Type: "pre", Language: t.lang}, t.start)
				stack = stack[:len(stack)-1]
				i += 3
			default:
				j := i + 1
				for j < len(in) && in[j] != '`' && in[j] != '\\' && in[j] != '\n' {
					j++
				}
				w.write(in[i:j])
				i = j
			}
			continue
		}
		if !strings.ContainsRune(reservedV2, rune(c)) {
			j := i + 1
			if c == '\n' {
				w.write("\n")
				i = j
				continue
			}
			for j < len(in) && !strings.ContainsRune(reservedV2, rune(in[j])) && in[j] != '\\' && in[j] != '\n' {
				j++
			}
			w.write(in[i:j])
			i = j
			continue
		}
		// An end of the innermost entity?
		if t != nil {
			end := 0
			switch t.typ {
			case "bold":
				if c == '*' {
					end = 1
				}
			case "italic":
				if c == '_' {
					end = 1
				}
			case "underline":
				if strings.HasPrefix(in[i:], "__") {
					end = 2
				}
			case "strikethrough":
				if c == '~' {
					end = 1
				}
			case "spoiler":
				if strings.HasPrefix(in[i:], "||") {
					end = 2
				}
			case "text_link", "custom_emoji":
				if c == ']' {
					url, n, err := markdownURL(in, i+1)
					if err != nil {
						return "", nil, err
					}
					e := Entity{Type: t.typ}
					if t.typ == "custom_emoji" {
						id, ok := strings.CutPrefix(url, "tg://emoji?id=")
						if !ok {
							return "", nil, fmt.Errorf("Custom emoji entity must contain a tg://emoji URL")
						}
						e.CustomEmojiID = id
					} else {
						e.URL = url
					}
					if e.URL != "" || e.CustomEmojiID != "" {
						w.add(e, t.start)
					}
					stack = stack[:len(stack)-1]
					i += 1 + n
					continue
				}
			}
			if end > 0 {
				w.add(Entity{Type: t.typ}, t.start)
				stack = stack[:len(stack)-1]
				i += end
				continue
			}
		}
		// The closing || of an expandable quote, at the end of a line.
		if quote >= 0 && expandable && strings.HasPrefix(in[i:], "||") && (i+2 == len(in) || in[i+2] == '\n') && (t == nil || t.typ != "spoiler") {
			quoteEnds = true
			i += 2
			continue
		}
		open := func(typ string, n int) {
			stack = append(stack, mdFrame{typ: typ, byteOff: i, start: w.n})
			i += n
		}
		switch {
		case strings.HasPrefix(in[i:], "__"):
			open("underline", 2)
		case c == '_':
			open("italic", 1)
		case c == '*':
			open("bold", 1)
		case c == '~':
			open("strikethrough", 1)
		case strings.HasPrefix(in[i:], "||"):
			open("spoiler", 2)
		case c == '[':
			open("text_link", 1)
		case strings.HasPrefix(in[i:], "!["):
			open("custom_emoji", 2)
		case strings.HasPrefix(in[i:], "```"):
			at := i
			i += 3
			lang := ""
			if nl := strings.IndexByte(in[i:], '\n'); nl >= 0 && !strings.ContainsAny(in[i:i+nl], " \t`\\") {
				lang = in[i : i+nl]
				i += nl + 1
			} else if nl == 0 {
				i++
			}
			stack = append(stack, mdFrame{typ: "pre", byteOff: at, start: w.n, lang: lang})
		case c == '`':
			open("code", 1)
		default:
			return "", nil, fmt.Errorf("Character '%c' is reserved and must be escaped with the preceding '\\'", c)
		}
	}
	if t := top(); t != nil {
		return "", nil, fmt.Errorf("Can't find end of %s entity at byte offset %d", entityNameV2[t.typ], t.byteOff)
	}
	if quote >= 0 && expandable && !quoteEnds {
		return "", nil, fmt.Errorf("Can't find end of ExpandableBlockQuote entity at byte offset %d", quoteByte)
	}
	closeQuote()
	return w.b.String(), w.ents, nil
}

// markdownURL reads "(url)" at in[i:], with \) and \\ escaped, and
// returns the URL and how many bytes it took. Without "(" there is no URL.
func markdownURL(in string, i int) (string, int, error) {
	if i >= len(in) || in[i] != '(' {
		return "", 0, nil
	}
	var b strings.Builder
	for j := i + 1; j < len(in); j++ {
		switch in[j] {
		case '\\':
			if j+1 < len(in) {
				j++
				b.WriteByte(in[j])
			}
		case ')':
			return strings.TrimSpace(b.String()), j - i + 1, nil
		default:
			b.WriteByte(in[j])
		}
	}
	return "", 0, fmt.Errorf("Can't find end of a URL at byte offset %d", i)
}

// parseMarkdown parses Telegram's legacy Markdown: *bold*, _italic_,
// `code`, ```pre``` and [text](url), none nested; a backslash escapes
// _ * ` and [ outside entities.
func parseMarkdown(in string) (string, []Entity, error) {
	var w entityWriter
	for i := 0; i < len(in); {
		c := in[i]
		if c == '\\' && i+1 < len(in) && strings.IndexByte("_*`[", in[i+1]) >= 0 {
			w.write(in[i+1 : i+2])
			i += 2
			continue
		}
		var end string
		typ := ""
		switch {
		case strings.HasPrefix(in[i:], "```"):
			typ, end = "pre", "```"
		case c == '*':
			typ, end = "bold", "*"
		case c == '_':
			typ, end = "italic", "_"
		case c == '`':
			typ, end = "code", "`"
		case c == '[':
			typ, end = "text_link", "]"
		}
		if typ == "" {
			j := i + 1
			for j < len(in) && strings.IndexByte("\\*_`[", in[j]) < 0 {
				j++
			}
			w.write(in[i:j])
			i = j
			continue
		}
		at := i
		i += len(end)
		if typ == "text_link" {
			i = at + 1
		}
		k := strings.Index(in[i:], end)
		if k < 0 {
			return "", nil, fmt.Errorf("Can't find end of the entity starting at byte offset %d", at)
		}
		inner := in[i : i+k]
		i += k + len(end)
		lang := ""
		if typ == "pre" {
			if nl := strings.IndexByte(inner, '\n'); nl >= 0 && !strings.ContainsAny(inner[:nl], " \t") {
				lang, inner = inner[:nl], inner[nl+1:]
			}
		}
		start := w.n
		w.write(inner)
		e := Entity{Type: typ, Language: lang}
		if typ == "text_link" {
			url, n, err := markdownURL(in, i)
			if err != nil {
				return "", nil, err
			}
			i += n
			if e.URL = url; url == "" {
				continue
			}
		}
		w.add(e, start)
	}
	return w.b.String(), w.ents, nil
}
