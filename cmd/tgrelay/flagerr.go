package main

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// flagErrShape matches the flag package's error for a value it could not
// parse: the value, the flag's name, and the cause.
var flagErrShape = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): (.*)$`)

// flagError says a parse error of fs in the command line's words, naming
// the flag as typed (--name) and what it wants.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + strings.TrimPrefix(name, "-")
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "--" + strings.TrimPrefix(name, "-") + " needs a value"
	}
	m := flagErrShape.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	f := fs.Lookup(m[2])
	if f == nil {
		return msg
	}
	return "--" + f.Name + ": " + valueProblem(f, m[1], m[3])
}

// valueProblem says what is wrong with value v of flag f, whose parser
// answered cause: by the flag's type for the standard ones (whose causes
// are the strconv package's words), else the parser's own words.
func valueProblem(f *flag.Flag, v, cause string) string {
	var kind any
	if g, ok := f.Value.(flag.Getter); ok {
		kind = g.Get()
	}
	switch kind.(type) {
	case time.Duration:
		return fmt.Sprintf("%q is not a duration (write it like 30s, 5m or 1h30m)", v)
	case bool:
		return fmt.Sprintf("%q is not true or false", v)
	case int, int64, uint, uint64:
		if cause == "value out of range" {
			return fmt.Sprintf("%s is out of range", v)
		}
		return fmt.Sprintf("%q is not a whole number", v)
	case float64:
		return fmt.Sprintf("%q is not a number", v)
	}
	if cause == "parse error" {
		return fmt.Sprintf("%q is not a valid value", v)
	}
	return cause
}

// setDuration is a duration flag that records whether it was set (on the
// command line or from the environment), for flags that only apply with
// another.
type setDuration struct {
	d   *time.Duration
	set *bool
}

func (v *setDuration) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v *setDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("parse error")
	}
	*v.d, *v.set = d, true
	return nil
}

// Get returns the duration, so that errors describe it as one.
func (v *setDuration) Get() any { return *v.d }
