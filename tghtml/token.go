package tghtml

import (
	"strconv"
	"strings"
)

// tokenKind tells what a token of markup is.
type tokenKind int

const (
	tokText     tokenKind = iota // a run of literal text
	tokEntity                    // a character reference; text holds its decoded value
	tokBare                      // a bare '<', '>' or '&' (or an entity Telegram refuses)
	tokStartTag                  // <name attr=...>
	tokEndTag                    // </name>
)

// attr is one attribute of a start tag; value is decoded. has is false for
// an attribute written without "=value".
type attr struct {
	name, value string
	has         bool
}

// token is one lexical unit of markup. off is its byte offset in the input.
type token struct {
	kind        tokenKind
	off         int
	text        string // tokText, tokEntity (decoded), tokBare (the raw characters)
	name        string // tags: lower-cased name
	attrs       []attr // start tags
	selfClosing bool   // start tags ending in "/>"
	strictOK    bool   // tokEntity: Telegram accepts this entity
}

// maxEntityLen bounds the characters read after '&' when looking for ';'.
const maxEntityLen = 12

// tokenize splits markup into tokens. It never fails: anything that is not a
// well-formed tag or entity is a bare character or text.
func tokenize(markup string) []token {
	var toks []token
	textStart := 0
	flush := func(end int) {
		if end > textStart {
			toks = append(toks, token{kind: tokText, off: textStart, text: markup[textStart:end]})
		}
	}
	i := 0
	for i < len(markup) {
		switch markup[i] {
		case '<':
			if t, n, ok := scanTag(markup, i); ok {
				flush(i)
				toks = append(toks, t)
				i += n
				textStart = i
				continue
			}
			flush(i)
			toks = append(toks, token{kind: tokBare, off: i, text: "<"})
			i++
			textStart = i
		case '>':
			flush(i)
			toks = append(toks, token{kind: tokBare, off: i, text: ">"})
			i++
			textStart = i
		case '&':
			flush(i)
			if dec, strict, n, ok := scanEntity(markup, i); ok {
				toks = append(toks, token{kind: tokEntity, off: i, text: dec, strictOK: strict})
				i += n
			} else {
				toks = append(toks, token{kind: tokBare, off: i, text: "&"})
				i++
			}
			textStart = i
		default:
			i++
		}
	}
	flush(len(markup))
	return toks
}

// scanEntity reads a character reference at s[i] == '&'. It returns the
// decoded text, whether Telegram accepts it, and its length.
func scanEntity(s string, i int) (dec string, strict bool, n int, ok bool) {
	end := strings.IndexByte(s[i+1:min(len(s), i+2+maxEntityLen)], ';')
	if end < 1 {
		return "", false, 0, false
	}
	body := s[i+1 : i+1+end]
	n = end + 2
	switch body {
	case "amp":
		return "&", true, n, true
	case "lt":
		return "<", true, n, true
	case "gt":
		return ">", true, n, true
	case "quot":
		return "\"", true, n, true
	case "apos":
		return "'", false, n, true
	case "nbsp":
		return "\u00a0", false, n, true
	}
	if body[0] != '#' || len(body) < 2 {
		return "", false, 0, false
	}
	digits, base, maxDigits := body[1:], 10, 7
	if digits[0] == 'x' || digits[0] == 'X' {
		digits, base, maxDigits = digits[1:], 16, 6
	}
	if len(digits) == 0 || len(digits) > maxDigits {
		return "", false, 0, false
	}
	for _, c := range []byte(digits) {
		if !isDigitIn(c, base) {
			return "", false, 0, false
		}
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil || v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) {
		return "", false, 0, false
	}
	return string(rune(v)), true, n, true
}

func isDigitIn(c byte, base int) bool {
	if c >= '0' && c <= '9' {
		return true
	}
	if base == 16 {
		c |= 0x20
		return c >= 'a' && c <= 'f'
	}
	return false
}

func isLetter(c byte) bool { c |= 0x20; return c >= 'a' && c <= 'z' }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

// scanTag reads a start or end tag at s[i] == '<'.
func scanTag(s string, i int) (token, int, bool) {
	j := i + 1
	end := false
	if j < len(s) && s[j] == '/' {
		end = true
		j++
	}
	if j >= len(s) || !isLetter(s[j]) {
		return token{}, 0, false
	}
	k := j
	for k < len(s) && (isLetter(s[k]) || (s[k] >= '0' && s[k] <= '9') || s[k] == '-') {
		k++
	}
	t := token{off: i, name: strings.ToLower(s[j:k])}
	if end {
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		if k < len(s) && s[k] == '>' {
			t.kind = tokEndTag
			return t, k + 1 - i, true
		}
		return token{}, 0, false
	}
	t.kind = tokStartTag
	for {
		sp := k
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		if k >= len(s) {
			return token{}, 0, false
		}
		switch {
		case s[k] == '>':
			return t, k + 1 - i, true
		case s[k] == '/' && k+1 < len(s) && s[k+1] == '>':
			t.selfClosing = true
			return t, k + 2 - i, true
		}
		if sp == k {
			return token{}, 0, false // an attribute must follow whitespace
		}
		a, n, ok := scanAttr(s, k)
		if !ok {
			return token{}, 0, false
		}
		t.attrs = append(t.attrs, a)
		k += n
	}
}

// scanAttr reads name, name=value, name="value" or name='value' at s[k].
func scanAttr(s string, k int) (attr, int, bool) {
	start := k
	for k < len(s) && !isSpace(s[k]) && s[k] != '=' && s[k] != '>' && s[k] != '/' &&
		s[k] != '"' && s[k] != '\'' && s[k] != '<' {
		k++
	}
	if k == start {
		return attr{}, 0, false
	}
	a := attr{name: strings.ToLower(s[start:k])}
	if k >= len(s) || s[k] != '=' {
		return a, k - start, true
	}
	k++
	if k >= len(s) {
		return attr{}, 0, false
	}
	a.has = true
	if q := s[k]; q == '"' || q == '\'' {
		e := strings.IndexByte(s[k+1:], q)
		if e < 0 {
			return attr{}, 0, false
		}
		a.value = decodeEntities(s[k+1 : k+1+e])
		return a, k + 2 + e - start, true
	}
	v := k
	for k < len(s) && !isSpace(s[k]) && s[k] != '>' && s[k] != '"' && s[k] != '\'' && s[k] != '<' && s[k] != '`' && s[k] != '=' {
		k++
	}
	if k == v {
		return attr{}, 0, false
	}
	a.value = decodeEntities(s[v:k])
	return a, k - start, true
}

// decodeEntities decodes the character references of an attribute value
// leniently; anything undecodable is kept as written.
func decodeEntities(s string) string {
	if strings.IndexByte(s, '&') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '&' {
			if dec, _, n, ok := scanEntity(s, i); ok {
				b.WriteString(dec)
				i += n
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}
