package broadcast

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Recipient is one chat a broadcast sends to: a numeric chat id, or the
// @username of a public channel or supergroup. Exactly one of ID and
// Username is set. The zero Recipient is invalid.
type Recipient struct {
	ID       int64  // the chat id (negative for groups and channels); 0 when Username is set
	Username string // "@name" (5–32 of letters, digits and _ after @, starting with a letter)
}

// ErrInvalidRecipient is returned (wrapped) for a recipient that is neither a
// non-zero chat id nor a valid @username.
var ErrInvalidRecipient = errors.New("broadcast: invalid recipient")

// ChatID returns a recipient addressed by chat id.
func ChatID(id int64) Recipient { return Recipient{ID: id} }

// Username returns a recipient addressed by "@name".
func Username(name string) Recipient { return Recipient{Username: name} }

// ParseRecipient reads a chat id ("-1001234") or an "@username".
func ParseRecipient(s string) (Recipient, error) {
	var r Recipient
	if len(s) > 0 && s[0] == '@' {
		r.Username = s
	} else if id, err := strconv.ParseInt(s, 10, 64); err == nil {
		r.ID = id
	}
	if err := r.Validate(); err != nil {
		return Recipient{}, err
	}
	return r, nil
}

// Validate reports whether r addresses exactly one chat.
func (r Recipient) Validate() error {
	switch {
	case r.ID != 0 && r.Username != "":
		return fmt.Errorf("%w: both an id and a username", ErrInvalidRecipient)
	case r.ID != 0:
		return nil
	case validUsername(r.Username):
		return nil
	case r.Username == "":
		return fmt.Errorf("%w: chat id 0", ErrInvalidRecipient)
	}
	return fmt.Errorf("%w: %q is not an @username", ErrInvalidRecipient, r.Username)
}

func validUsername(s string) bool {
	if len(s) < 6 || len(s) > 33 || s[0] != '@' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		letter := (c|0x20) >= 'a' && (c|0x20) <= 'z'
		if !letter && !(i > 1 && (c >= '0' && c <= '9' || c == '_')) {
			return false
		}
	}
	return true
}

// String returns the chat id in decimal, or the @username.
func (r Recipient) String() string {
	if r.Username != "" {
		return r.Username
	}
	return strconv.FormatInt(r.ID, 10)
}

// ChatIDValue returns the value to pass as a Bot API chat_id: an int64 or
// the @username string.
func (r Recipient) ChatIDValue() any {
	if r.Username != "" {
		return r.Username
	}
	return r.ID
}

// MarshalJSON writes the id as a JSON number or the username as a string.
func (r Recipient) MarshalJSON() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Username != "" {
		return json.Marshal(r.Username)
	}
	return strconv.AppendInt(nil, r.ID, 10), nil
}

// UnmarshalJSON reads a JSON integer (int64) or an "@username" string, and
// validates it.
func (r *Recipient) UnmarshalJSON(b []byte) error {
	var v Recipient
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &v.Username); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidRecipient, err)
		}
	} else {
		id, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %.40q is not an int64 chat id", ErrInvalidRecipient, b)
		}
		v.ID = id
	}
	if err := v.Validate(); err != nil {
		return err
	}
	*r = v
	return nil
}
