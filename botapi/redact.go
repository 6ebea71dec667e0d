package botapi

import (
	"regexp"
	"strings"
)

// Redacted replaces every masked secret.
const Redacted = "[redacted]"

// tokenShape matches a bot token: the bot id (five or more digits), a colon,
// and the secret half (thirty or more of [A-Za-z0-9_-]). Only the secret half
// is replaced, so the bot id stays readable.
var tokenShape = regexp.MustCompile(`([0-9]{5,}):[A-Za-z0-9_-]{30,}`)

// Redact masks the secret half of anything in s shaped like a bot token,
// keeping the bot id: "123456:[redacted]". A token too short to have that
// shape (as in tests) is not recognised; use [Client.Redact] to mask a known
// token whatever its shape.
func Redact(s string) string {
	return tokenShape.ReplaceAllString(s, "$1:"+Redacted)
}

// redactExact masks every occurrence of token in s, also in its escaped URL
// forms, keeping the bot id before the colon readable, then masks by shape.
func redactExact(s, token string) string {
	if token != "" {
		keep := ""
		if i := strings.IndexByte(token, ':'); i >= 0 {
			keep = token[:i+1]
		}
		for _, form := range []string{token, strings.ReplaceAll(token, ":", "%3A"), strings.ReplaceAll(token, ":", "%3a")} {
			s = strings.ReplaceAll(s, form, keep+Redacted)
		}
	}
	return Redact(s)
}
