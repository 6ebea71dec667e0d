// Package wire holds the words tgrelay's parts and an app exchange over
// HTTP, each defined once: the headers that carry an attempt's identity,
// the per-attempt Bot API root and its parser, and the outcome header of
// the answers tgrelay makes itself (the gateway's and the limiter's).
//
// Package forward writes these words, package gateway reads them, and
// package throttle, transport and intake recognise the outcome header on
// the answers they pass through. wire imports nothing of tgrelay's, so
// every package can use it. An app written in Go may use it too, to read
// the identity of an update forward or the outcome of a call.
package wire

import (
	"net/http"
	"strconv"
)

// The headers of an attempt's identity. The forward sets all three on
// every update it posts to the app (and on every exhaustion delivery); the
// gateway reads them on a call, so an app copies them from the update's
// request onto the calls it makes for that update. See [SetIdentity] and
// [ParseIdentity].
const (
	// HeaderUpdateID carries the update id, a non-negative integer.
	HeaderUpdateID = "Tgrelay-Update-Id"
	// HeaderAttempt carries the attempt number, 1 or more.
	HeaderAttempt = "Tgrelay-Attempt"
	// HeaderClaimID carries the claim id: 1 to [MaxClaimIDBytes] of
	// A-Z a-z 0-9 _ -.
	HeaderClaimID = "Tgrelay-Claim-Id"
)

// MaxClaimIDBytes bounds the length of a claim id [ParseIdentity] accepts.
const MaxClaimIDBytes = 128

// SetIdentity sets the three identity headers of an attempt on h.
func SetIdentity(h http.Header, updateID int64, attempt int, claimID string) {
	h.Set(HeaderUpdateID, strconv.FormatInt(updateID, 10))
	h.Set(HeaderAttempt, strconv.Itoa(attempt))
	h.Set(HeaderClaimID, claimID)
}

// IdentityError reports an attempt identity that cannot be read: Part
// names what is wrong ("update id", "attempt number" or "claim id"). Its
// message never quotes the value.
type IdentityError struct {
	Part string
}

// Error describes the malformed part.
func (e *IdentityError) Error() string {
	switch e.Part {
	case "update id":
		return "the update id of the attempt identity is not a non-negative integer"
	case "attempt number":
		return "the attempt number of the attempt identity is not a positive integer"
	}
	return "the " + e.Part + " of the attempt identity is malformed"
}

// ParseIdentity reads an attempt identity from its three textual parts,
// as [HeaderUpdateID], [HeaderAttempt] and [HeaderClaimID] or the segments
// of an [AttemptRoot] carry them. It fails with a [*IdentityError] naming
// the first malformed part.
func ParseIdentity(updateID, attempt, claimID string) (int64, int, string, error) {
	u, err := strconv.ParseInt(updateID, 10, 64)
	if err != nil || u < 0 {
		return 0, 0, "", &IdentityError{Part: "update id"}
	}
	a, err := strconv.Atoi(attempt)
	if err != nil || a < 1 {
		return 0, 0, "", &IdentityError{Part: "attempt number"}
	}
	if !validClaimID(claimID) {
		return 0, 0, "", &IdentityError{Part: "claim id"}
	}
	return u, a, claimID, nil
}

func validClaimID(s string) bool {
	if s == "" || len(s) > MaxClaimIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
