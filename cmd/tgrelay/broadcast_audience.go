package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/tgrelay/tgrelay/broadcast"
)

// audienceProblem is one invalid line of an audience file.
type audienceProblem struct {
	Line int    // 1-based
	Msg  string // what is wrong with it
}

// audienceError lists the invalid lines of an audience file (at most
// maxAudienceProblems of them; More counts the rest).
type audienceError struct {
	Path     string
	Problems []audienceProblem
	More     int
	Err      error // a problem with the file as a whole, when Problems is empty
}

func (e *audienceError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "audience file %s", e.Path)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
		return b.String()
	}
	fmt.Fprintf(&b, " has %d invalid line(s):", len(e.Problems)+e.More)
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  line %d: %s", p.Line, p.Msg)
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more", e.More)
	}
	return b.String()
}

func (e *audienceError) Unwrap() error { return e.Err }

// readAudienceFile reads and checks an audience file (see parseAudience). An
// invalid file is an *audienceError.
func readAudienceFile(path string) ([]broadcast.Recipient, error) {
	b, err := readBounded(path, maxAudienceFileBytes)
	if err != nil {
		return nil, &audienceError{Path: path, Err: err}
	}
	rs, err := parseAudience(b)
	if ae, ok := err.(*audienceError); ok {
		ae.Path = path
	}
	return rs, err
}

// parseAudience reads an audience: one chat id ("-1001234") or @username per
// line. Surrounding spaces, a trailing '\r', a leading UTF-8 byte order mark,
// blank lines and comments (from '#' to the end of the line) are ignored.
// Every invalid line is reported with its number, in one *audienceError; a
// file with no recipient, or with more than broadcast.MaxRecipients, is
// refused too. Duplicates are kept (package broadcast removes them).
func parseAudience(b []byte) ([]broadcast.Recipient, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	var (
		rs []broadcast.Recipient
		ae audienceError
	)
	problem := func(line int, format string, a ...any) {
		if len(ae.Problems) < maxAudienceProblems {
			ae.Problems = append(ae.Problems, audienceProblem{Line: line, Msg: fmt.Sprintf(format, a...)})
		} else {
			ae.More++
		}
	}
	for n := 1; len(b) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		if len(line) > maxAudienceLineBytes {
			problem(n, "longer than %d bytes", maxAudienceLineBytes)
			continue
		}
		s := string(line)
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		r, err := parseAudienceLine(s)
		if err != nil {
			problem(n, "%v", err)
			continue
		}
		if len(rs) == broadcast.MaxRecipients {
			return nil, &audienceError{Err: fmt.Errorf("more than %d recipients; split the audience into several broadcasts", broadcast.MaxRecipients)}
		}
		rs = append(rs, r)
	}
	if len(ae.Problems) > 0 {
		return nil, &ae
	}
	if len(rs) == 0 {
		return nil, &audienceError{Err: fmt.Errorf("no recipients (want one chat id or @username per line)")}
	}
	return rs, nil
}

// parseAudienceLine reads one recipient, with a message naming what is
// wrong.
func parseAudienceLine(s string) (broadcast.Recipient, error) {
	if s[0] != '@' {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return broadcast.Recipient{}, fmt.Errorf("%.40q is neither a chat id nor an @username", s)
		}
		if id == 0 {
			return broadcast.Recipient{}, fmt.Errorf("chat id 0 is not a chat")
		}
	}
	r, err := broadcast.ParseRecipient(s)
	if err != nil {
		if s[0] == '@' {
			return broadcast.Recipient{}, fmt.Errorf("%.40q is not a Telegram @username: want 5 to 32 letters, digits or _ after the @, starting with a letter", s)
		}
		return broadcast.Recipient{}, fmt.Errorf("%.40q: %w", s, err)
	}
	return r, nil
}
