package broadcast

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/tghtml"
)

// Message is what [Sender] sends: a text (sendMessage), or a copy of a
// prepared message with its media (copyMessage, when MessageID is set).
type Message struct {
	Text      string // the text; with ParseMode "HTML" it must pass tghtml.Check
	ParseMode string // "", "HTML" or "MarkdownV2"

	FromChatID int64 // copyMessage: the chat holding the prepared message
	MessageID  int64 // copyMessage: the prepared message; zero means send Text
}

// Fingerprint identifies m for Config.Fingerprint: "sha256:" and the hex
// SHA-256 of its fields, so a resumed broadcast can tell that it is asked to
// send another message.
func (m Message) Fingerprint() string {
	b, _ := json.Marshal(m) // cannot fail: strings and integers
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ErrInvalidMessage is returned (wrapped) by [Sender] for a message Telegram
// would refuse for every recipient.
var ErrInvalidMessage = errors.New("broadcast: invalid message")

// Sender returns a Config.SendFunc that sends m through c to each
// recipient. It validates m first: exactly one of Text or MessageID, a known
// parse mode, HTML that tghtml.Check accepts, a visible text within
// tghtml.TextLimit. The returned func is safe for concurrent use and passes
// its ctx (deadline included) to [botapi.Client.Call].
func Sender(c *botapi.Client, m Message) (func(ctx context.Context, r Recipient) error, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidMessage)
	}
	switch m.ParseMode {
	case "", "HTML", "MarkdownV2":
	default:
		return nil, fmt.Errorf("%w: parse mode %q", ErrInvalidMessage, m.ParseMode)
	}
	if m.MessageID != 0 {
		if m.Text != "" || m.ParseMode != "" || m.FromChatID == 0 {
			return nil, fmt.Errorf("%w: a copy takes FromChatID and MessageID only", ErrInvalidMessage)
		}
		return func(ctx context.Context, r Recipient) error {
			_, err := c.Call(ctx, "copyMessage", &copyParams{ChatID: r.ChatIDValue(), FromChatID: m.FromChatID, MessageID: m.MessageID})
			return err
		}, nil
	}
	visible := m.Text
	if m.ParseMode == "HTML" {
		if p := tghtml.Check(m.Text); p != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidMessage, p)
		}
		visible = tghtml.Text(m.Text)
	}
	if n := tghtml.Len(visible); n == 0 || n > tghtml.TextLimit {
		return nil, fmt.Errorf("%w: visible text of %d UTF-16 units, want 1..%d", ErrInvalidMessage, n, tghtml.TextLimit)
	}
	return func(ctx context.Context, r Recipient) error {
		_, err := c.Call(ctx, "sendMessage", &textParams{ChatID: r.ChatIDValue(), Text: m.Text, ParseMode: m.ParseMode})
		return err
	}, nil
}

// textParams and copyParams are the parameters of sendMessage and
// copyMessage; structs rather than maps, so a send builds no map and
// encodes without sorting keys.
type textParams struct {
	ChatID    any    `json:"chat_id"`
	Text      string `json:"text"`
	ParseMode string `json:"parse_mode,omitempty"`
}

type copyParams struct {
	ChatID     any   `json:"chat_id"`
	FromChatID int64 `json:"from_chat_id"`
	MessageID  int64 `json:"message_id"`
}
