package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// A flag's bad value is answered in the command line's words, naming the
// flag as typed and what it wants, not in the flag package's.
func TestFlagErrorsInOurWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "abc"}, `--timeout: "abc" is not a duration (write it like 30s, 5m or 1h30m)`},
		{[]string{"--poll-timeout", "soon"}, `--poll-timeout: "soon" is not a duration`},
		{[]string{"--max-attempts", "x"}, `--max-attempts: "x" is not a whole number`},
		{[]string{"--max-attempts", "99999999999999999999"}, `--max-attempts: 99999999999999999999 is out of range`},
		{[]string{"--poll=maybe"}, `--poll: "maybe" is not true or false`},
		{[]string{"--nope"}, `unknown flag --nope`},
		{[]string{"--timeout"}, `--timeout needs a value`},
		{[]string{"--admin-trusted-proxy", "nope"}, `--admin-trusted-proxy: "nope" is not an IP address or a CIDR prefix`},
	} {
		fs := newServeFlagSetForTest()
		defineServeFlags(fs)
		err := parseFlags(fs, tc.args, io.Discard)
		ue, ok := errors.AsType[*usageError](err)
		if !ok || ue.msg != tc.want && !strings.HasPrefix(ue.msg, tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
		if ok && (strings.Contains(ue.msg, "invalid value") || strings.Contains(ue.msg, "parse error")) {
			t.Errorf("%v: %q speaks the flag package's words", tc.args, ue.msg)
		}
	}
}

// TestInterleavedFlagErrorsInOurWords: the commands whose flags may follow
// their subcommand (updates, webhook) say a bad flag in the same words as
// serve, not the flag package's.
func TestInterleavedFlagErrorsInOurWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"updates", "ack", "1", "--attempt", "abc"}, `--attempt: "abc" is not a whole number`},
		{[]string{"updates", "ls", "--nope"}, `unknown flag --nope`},
		{[]string{"updates", "ls", "--state"}, `--state needs a value`},
		{[]string{"webhook", "check", "--timeout", "5"}, `--timeout: "5" is not a duration`},
	} {
		code, _, stderr := runCapture(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tc.args, code, stderr, exitUsage, tc.want)
		}
		if strings.Contains(stderr, "invalid value") || strings.Contains(stderr, "parse error") || strings.Contains(stderr, "flag provided") {
			t.Errorf("%v: %q speaks the flag package's words", tc.args, stderr)
		}
	}
}
