// Package configerr holds the one error type every tgrelay package returns
// for an invalid field of its Config. Each package names it as its own
// ConfigError (a type alias: intake.ConfigError, gateway.ConfigError and
// relay.ConfigError are the same type), so one errors.As finds it whatever
// package refused the field, and a package that nests another's Config
// prefixes the field path ("Intake.LeaseDuration") with [Nest] instead of
// checking the other package's bounds itself.
package configerr

import (
	"errors"
	"fmt"
	"net/url"
)

// Error is an invalid configuration field. Field is the field's path
// relative to the Config of the package that reports it: "LeaseDuration",
// "Limits.PerChat.Count", or, from a package that nests another's config,
// "Intake.LeaseDuration". A command line maps the path to its own flag.
// Err says what is wrong, phrased to follow the field's name ("is 0: want
// 1 to 1000"), and never quotes a secret or a URL.
type Error struct {
	// Pkg is the package whose Config holds Field, the prefix of the
	// message ("relay"); empty prints none.
	Pkg string
	// Field is the path of the invalid field.
	Field string
	// Err says what is wrong with it.
	Err error
	// Kind, when set, is a sentinel of Pkg the error also matches with
	// errors.Is (such as gateway.ErrInvalidConfig); it is not printed.
	Kind error
}

// Error implements error: "<Pkg>: <Field> <what is wrong>".
func (e *Error) Error() string {
	msg := e.Field + " " + e.Err.Error()
	if e.Pkg != "" {
		msg = e.Pkg + ": " + msg
	}
	return msg
}

// Unwrap returns Err and, when set, Kind.
func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Kind}
}

// New returns an *Error of package pkg for field, with the message
// format and args (which may wrap an error with %w).
func New(pkg, field, format string, args ...any) *Error {
	return &Error{Pkg: pkg, Field: field, Err: fmt.Errorf(format, args...)}
}

// Nest reports err, an error of a nested Config held in field prefix of
// package pkg's Config, in pkg's terms: an *Error gets its path prefixed
// ("Intake." + "LeaseDuration") and pkg as its package; any other error
// becomes an *Error for prefix itself. A nil err stays nil. An empty prefix
// keeps the path (a nested Config whose fields are the outer's own).
func Nest(pkg, prefix string, err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		return &Error{Pkg: pkg, Field: prefix, Err: err}
	}
	field := ce.Field
	if prefix != "" {
		field = prefix + "." + field
	}
	return &Error{Pkg: pkg, Field: field, Err: ce.Err, Kind: ce.Kind}
}

// ErrURLCredential is the cause of every refusal of a URL setting that
// carries a user name or password ([URLCredential]).
var ErrURLCredential = errors.New("has a user name or password: a credential in the URL would reach logs and error messages")

// URLCredential is the one rule for URL settings that must hold no
// credential (an endpoint, a collector, a webhook address): it returns nil
// when u has no user name or password, else an error wrapping
// [ErrURLCredential], phrased to follow the setting's name (as [Error.Err]
// is), and ending in "; " + instead when instead (where the credential
// belongs) is not empty. It never quotes u. A URL whose credential is
// legitimate (a database's, a proxy's) does not go through it.
func URLCredential(u *url.URL, instead string) error {
	if u.User == nil {
		return nil
	}
	if instead == "" {
		return ErrURLCredential
	}
	return fmt.Errorf("%w; %s", ErrURLCredential, instead)
}

// ErrNotHTTPURL is the cause of every refusal of a URL setting that is not
// an absolute http or https URL ([HTTPURL]).
var ErrNotHTTPURL = errors.New("is not a URL: want an absolute http:// or https:// URL")

// ErrNotBaseURL is the cause of every refusal of a base URL setting
// ([BaseURL]).
var ErrNotBaseURL = errors.New("is not a base URL: want an absolute http:// or https:// URL without a user, query or fragment")

// HTTPURL is the one rule for a URL setting that must be an absolute http
// or https URL with a host: it returns raw parsed, or an error wrapping
// [ErrNotHTTPURL], phrased to follow the setting's name. It never quotes
// raw (url.Parse's own error does).
func HTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, ErrNotHTTPURL
	}
	return u, nil
}

// BaseURL is the one rule for a URL that paths are appended to (a Bot API
// root, the gateway's public address): an absolute http or https URL with
// a host, and without a user (a credential there would go nowhere, or
// reach every header and log line the URL is shown in), a query or a
// fragment (either would end up before the appended path). It returns raw
// parsed, or an error wrapping [ErrNotBaseURL], phrased to follow the
// setting's name. It never quotes raw.
func BaseURL(raw string) (*url.URL, error) {
	u, err := HTTPURL(raw)
	if err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, ErrNotBaseURL
	}
	return u, nil
}
