// Package jsonscan walks JSON that [encoding/json.Valid] accepted,
// without allocating: it steps over the members of an object and hands
// back each key and raw value as a slice of the input.
//
// It is the fast path of readers that want a few fields of a body and
// would otherwise decode every value with encoding/json (intake's reading
// of an update, throttle's reading of a call's chat_id). It decodes
// nothing: a key or string literal with an escape or a non-ASCII byte is
// reported as not plain, since only encoding/json knows what it decodes
// to, and a caller that meets one leaves the body to encoding/json.
//
// It checks little either. Its input must be JSON that json.Valid
// accepted (or a value cut whole out of such JSON); on any other input its
// answers mean nothing, though it never panics and always ends.
package jsonscan

// Scanner walks one JSON text that [encoding/json.Valid] accepted, from
// its start. It holds a position in the text and a [Scanner.Bad] flag. A
// Scanner is not safe for concurrent use; the slices it returns alias its
// input.
type Scanner struct {
	b   []byte
	i   int
	bad bool // the walk met what valid JSON cannot hold here
}

// New returns a Scanner at the first byte of b, which must be JSON that
// [encoding/json.Valid] accepted.
func New(b []byte) *Scanner { return &Scanner{b: b} }

// Bad reports whether the walk met a byte that valid JSON cannot hold
// where it stood: [Scanner.Member] found no key where one must be, or no
// colon after a key. It stays true once set. On JSON that json.Valid
// accepted, walked as the methods' docs require, it is never set; a caller
// treats it as "this walk's answers cannot be trusted".
func (s *Scanner) Bad() bool { return s.bad }

// Space skips white space (space, tab, newline, carriage return).
func (s *Scanner) Space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Consume skips the byte c and reports true when it is the next byte;
// otherwise it reports false and does not move. It skips no white space
// first: call [Scanner.Space] for that.
func (s *Scanner) Consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// Member reads the next member of the object whose '{' was consumed: its
// key, without the quotes, and its raw value, without the white space
// around it. key is nil (and the member still skipped) when the key has an
// escape or a non-ASCII byte: encoding/json would decode it, and what it
// decodes to is not the bytes. more is false after the object's closing
// '}', at the end of the input, or when the walk went bad ([Scanner.Bad]).
//
// The loop over an object's members:
//
//	for key, raw, more := s.Member(); more; key, raw, more = s.Member() {
//		...
//	}
func (s *Scanner) Member() (key, raw []byte, more bool) {
	s.Space()
	if s.Consume(',') {
		s.Space()
	}
	if s.Consume('}') || s.i >= len(s.b) {
		return nil, nil, false
	}
	if s.b[s.i] != '"' {
		s.bad = true
		return nil, nil, false
	}
	start := s.i
	plain, closed := s.str()
	if !closed {
		s.bad = true // the input ends inside the key: not valid JSON
		return nil, nil, false
	}
	key = s.b[start+1 : s.i-1]
	if !plain {
		key = nil
	}
	s.Space()
	if !s.Consume(':') {
		s.bad = true
		return nil, nil, false
	}
	s.Space()
	start = s.i
	s.value()
	return key, s.b[start:s.i], true
}

// str skips the string literal whose opening quote is the next byte and
// reports whether it is plain (no escape, no non-ASCII byte) and whether
// its closing quote was found before the input ended.
func (s *Scanner) str() (plain, closed bool) {
	plain = true
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return plain, true
		case c == '\\':
			plain = false
			s.i++
		case c >= 0x80:
			plain = false
		}
	}
	s.i = len(s.b) // an escape as the last byte stepped past the end
	return plain, false
}

// value skips one value: a string, an object or array with all it holds
// (a bracket inside a string does not count), or a number or literal,
// which ends at the first delimiter or white space.
func (s *Scanner) value() {
	if s.i >= len(s.b) {
		return
	}
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return
			}
		}
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}

// PlainString returns the content of the JSON string literal lit, quotes
// removed, when it is plain: no escape and no non-ASCII byte, so the
// content is what encoding/json decodes it to. ok is false for any other
// literal, and for lit that is not a string literal at all.
func PlainString(lit []byte) (content []byte, ok bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, false
	}
	in := lit[1 : len(lit)-1]
	for _, c := range in {
		if c == '\\' || c >= 0x80 {
			return nil, false
		}
	}
	return in, true
}
