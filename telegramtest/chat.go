package telegramtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Errors of the simulated users' actions.
var (
	// ErrUnknownChat means the chat was not created on this server.
	ErrUnknownChat = errors.New("telegramtest: unknown chat")
	// ErrUnknownUser means the user was not created on this server.
	ErrUnknownUser = errors.New("telegramtest: unknown user")
	// ErrUnknownMessage means the message does not exist in that chat, or
	// was not sent by the bot, or has no such button.
	ErrUnknownMessage = errors.New("telegramtest: unknown message or button")
	// ErrChatMigrated means the group was upgraded to a supergroup; users
	// write in the supergroup now.
	ErrChatMigrated = errors.New("telegramtest: group was upgraded to a supergroup")
	// ErrDeactivated means a deactivated user tried to act.
	ErrDeactivated = errors.New("telegramtest: user is deactivated")
	// ErrChannel means users cannot write in a channel.
	ErrChannel = errors.New("telegramtest: users cannot write in a channel")
	// ErrQueueFull means Config.MaxPendingUpdates updates already wait.
	ErrQueueFull = errors.New("telegramtest: pending update queue full")
	// ErrLedgerFull means Config.MaxMessages messages are already stored.
	ErrLedgerFull = errors.New("telegramtest: message ledger full")
	// ErrBadMessage means a simulated user's message is not one Telegram
	// could carry (empty, or two kinds of content at once).
	ErrBadMessage = errors.New("telegramtest: invalid user message")
)

// ChatType is a chat's kind, as Telegram names it.
type ChatType string

// The chat types.
const (
	ChatPrivate    ChatType = "private"
	ChatGroup      ChatType = "group"
	ChatSupergroup ChatType = "supergroup"
	ChatChannel    ChatType = "channel"
)

// User is a simulated Telegram user. It is a plain value; the server keeps
// its state (blocked, deactivated).
type User struct {
	ID           int64  `json:"id"`
	FirstName    string `json:"first_name"`
	LastName     string `json:"last_name,omitempty"`
	Username     string `json:"username,omitempty"`
	LanguageCode string `json:"language_code,omitempty"`
}

// Chat is a simulated chat, as a plain value. UserID is set for private
// chats.
type Chat struct {
	ID       int64    `json:"id"`
	Type     ChatType `json:"type"`
	Title    string   `json:"title,omitempty"`
	Username string   `json:"username,omitempty"`
	UserID   int64    `json:"user_id,omitempty"`
}

type userState struct {
	User
	blocked     bool
	deactivated bool
}

type chatState struct {
	Chat
	members    map[int64]bool
	creator    int64 // the first member of a group, 0 for none
	pinned     []int64
	migratedTo int64
	kicked     bool
	nextMsgID  int64
	msgs       map[int64]*storedMsg
}

// storedMsg is a message the server keeps, to edit, copy, forward, delete,
// reply to or press a button on.
type storedMsg struct {
	id         int64
	fromBot    bool
	fromUser   int64
	date       int64
	editDate   int64
	threadID   int64
	kind       string   // msgText, msgPhoto, …
	text       string   // the plain text or caption a reader sees
	sent       string   // the text or caption as the bot sent it (markup included)
	entities   []Entity // of text
	markup     json.RawMessage
	replyTo    int64       // the message replied to, in the same chat
	file       *storedFile // photo, document, sticker, video, audio
	mediaGroup string
	extra      any // location, dice or poll
}

// Message kinds.
const (
	msgText     = "text"
	msgPhoto    = "photo"
	msgDocument = "document"
	msgVideo    = "video"
	msgAudio    = "audio"
	msgSticker  = "sticker"
	msgVoice    = "voice"
	msgAnim     = "animation"
	msgContact  = "contact"
	msgVenue    = "venue"
	msgLocation = "location"
	msgDice     = "dice"
	msgPoll     = "poll"
)

// hasMedia reports whether m carries a caption rather than a text.
func (m *storedMsg) hasMedia() bool { return m.file != nil }

// state is everything the server simulates, guarded by Server.mu.
type state struct {
	nextUserID    int64
	nextGroupID   int64
	nextSuperID   int64
	nextUpdateID  int64
	nextCallback  int64
	users         map[int64]*userState
	chats         map[int64]*chatState
	usernames     map[string]int64 // lower-case @username → chat id
	stored        int              // messages in all chats, bounded by MaxMessages
	pending       []*pendingUpdate // in update_id order
	pendingChats  map[int64]int    // pending updates per chat
	callbacks     map[string]callbackState
	webhook       webhookState
	pollGen       uint64 // a new getUpdates ends the previous one
	polling       int    // long polls waiting now
	ledger        []Message
	deliveries    []Delivery
	droppedDeliv  int
	faults        []*armedFault
	limits        Limits
	rate          rateState
	calls         map[string]int
	epoch         uint64                 // bumped by Reset
	files         map[string]*storedFile // by file_id
	filePaths     map[string]*storedFile // by file_path
	fileBytes     int64                  // content kept in files, bounded by MaxFileBytes
	nextFile      int64
	commands      map[string][]botCommand // by scope and language
	menuButtons   map[int64]json.RawMessage
	botTexts      map[string]string // name, description, short_description by language
	answers       []CallbackAnswer
	inline        map[string]*inlineState
	inlineAnswers []InlineAnswer
	retryUntil    time.Time     // the latest retry_after a 429 asked for, in real time
	dl            deadlineState // queries' deadlines and payments (queries.go, payments.go)
}

func newState(l Limits) state {
	return state{
		nextUserID:   100000001,
		nextGroupID:  4000000001,
		nextSuperID:  1001000000001,
		nextUpdateID: 700000001,
		users:        map[int64]*userState{},
		chats:        map[int64]*chatState{},
		usernames:    map[string]int64{},
		callbacks:    map[string]callbackState{},
		pendingChats: map[int64]int{},
		limits:       l,
		rate:         newRateState(),
		calls:        map[string]int{},
		files:        map[string]*storedFile{},
		filePaths:    map[string]*storedFile{},
		commands:     map[string][]botCommand{},
		menuButtons:  map[int64]json.RawMessage{},
		botTexts:     map[string]string{},
		inline:       map[string]*inlineState{},
	}
}

// randomToken returns a realistic-looking bot token.
func randomToken(r *rand.Rand) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	var b strings.Builder
	fmt.Fprintf(&b, "%d:AA", 1000000000+r.Int64N(8999999999))
	for range 33 {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func botIDOf(token string) int64 {
	id, _ := strconv.ParseInt(token[:strings.IndexByte(token, ':')], 10, 64)
	return id
}

// NewUser creates a simulated user with the given first name and a
// username derived from it.
func (s *Server) NewUser(firstName string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.st.nextUserID
	s.st.nextUserID++
	u := User{ID: id, FirstName: firstName, Username: fmt.Sprintf("user%d", id), LanguageCode: "en"}
	s.st.users[id] = &userState{User: u}
	return u
}

// NewPrivateChat returns the private chat between u and the bot (the same
// chat when called twice). Its id is the user's id, as in Telegram.
func (s *Server) NewPrivateChat(u User) (Chat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.st.users[u.ID]; !ok {
		return Chat{}, ErrUnknownUser
	}
	if c, ok := s.st.chats[u.ID]; ok {
		return c.Chat, nil
	}
	c := &chatState{
		Chat:    Chat{ID: u.ID, Type: ChatPrivate, UserID: u.ID},
		members: map[int64]bool{u.ID: true},
		msgs:    map[int64]*storedMsg{},
	}
	s.st.chats[c.ID] = c
	return c.Chat, nil
}

// NewGroup creates a basic group with the bot and members in it.
func (s *Server) NewGroup(title string, members ...User) (Chat, error) {
	return s.newGroupChat(ChatGroup, title, members)
}

// NewSupergroup creates a supergroup (id -100…) with the bot and members
// in it, with the public username title's lower-case letters and digits.
func (s *Server) NewSupergroup(title string, members ...User) (Chat, error) {
	return s.newGroupChat(ChatSupergroup, title, members)
}

// NewChannel creates a channel where the bot is an administrator.
func (s *Server) NewChannel(title string) (Chat, error) {
	return s.newGroupChat(ChatChannel, title, nil)
}

func (s *Server) newGroupChat(typ ChatType, title string, members []User) (Chat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newGroupChatLocked(typ, title, members)
}

func (s *Server) newGroupChatLocked(typ ChatType, title string, members []User) (Chat, error) {
	c := &chatState{members: map[int64]bool{}, msgs: map[int64]*storedMsg{}}
	for _, m := range members {
		if _, ok := s.st.users[m.ID]; !ok {
			return Chat{}, ErrUnknownUser
		}
		c.members[m.ID] = true
		if c.creator == 0 {
			c.creator = m.ID
		}
	}
	c.Type, c.Title = typ, title
	if typ == ChatGroup {
		c.ID = -s.st.nextGroupID
		s.st.nextGroupID++
	} else {
		c.ID = -s.st.nextSuperID
		s.st.nextSuperID++
		c.Username = usernameOf(title, c.ID)
		s.st.usernames[strings.ToLower(c.Username)] = c.ID
	}
	s.st.chats[c.ID] = c
	return c.Chat, nil
}

func usernameOf(title string, id int64) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	if b.Len() < 5 {
		fmt.Fprintf(&b, "chat%d", -id)
	}
	return b.String()
}

// SetBlocked makes the user block (or unblock) the bot: sends to their
// private chat are refused with 403 "Forbidden: bot was blocked by the
// user".
func (s *Server) SetBlocked(u User, blocked bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	us, ok := s.st.users[u.ID]
	if !ok {
		return ErrUnknownUser
	}
	us.blocked = blocked
	return nil
}

// Deactivate deletes the user's account: sends to them are refused with
// 403 "Forbidden: user is deactivated".
func (s *Server) Deactivate(u User) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	us, ok := s.st.users[u.ID]
	if !ok {
		return ErrUnknownUser
	}
	us.deactivated = true
	return nil
}

// KickBot removes the bot from a group, supergroup or channel: sends there
// are refused with 403.
func (s *Server) KickBot(c Chat) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.st.chats[c.ID]
	if !ok || cs.Type == ChatPrivate {
		return ErrUnknownChat
	}
	cs.kicked = true
	return nil
}

// UpgradeGroup turns a basic group into a new supergroup with the same
// members and returns it. Sends to the old id are refused with 400 "group
// chat was upgraded to a supergroup chat" and parameters.migrate_to_chat_id.
func (s *Server) UpgradeGroup(c Chat) (Chat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.st.chats[c.ID]
	if !ok || cs.Type != ChatGroup || cs.migratedTo != 0 {
		return Chat{}, ErrUnknownChat
	}
	var members []User
	for id := range cs.members {
		members = append(members, s.st.users[id].User)
	}
	sg, err := s.newGroupChatLocked(ChatSupergroup, cs.Title, members)
	if err != nil {
		return Chat{}, err
	}
	cs.migratedTo = sg.ID
	s.st.chats[sg.ID].creator = cs.creator
	return sg, nil
}

// Chats returns every chat created, in no particular order.
func (s *Server) Chats() []Chat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Chat, 0, len(s.st.chats))
	for _, c := range s.st.chats {
		out = append(out, c.Chat)
	}
	return out
}

// lookupChatLocked resolves a chat_id parameter (an integer or @username)
// and applies the refusals that depend only on the chat.
func (s *Server) lookupChatLocked(p params, key string) (*chatState, *apiError) {
	raw := strings.TrimSpace(p.get(key))
	if raw == "" {
		return nil, badRequest(key + " is empty")
	}
	var id int64
	if name, ok := strings.CutPrefix(raw, "@"); ok {
		id, ok = s.st.usernames[strings.ToLower(name)]
		if !ok {
			return nil, badRequest("chat not found")
		}
	} else {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, badRequest("chat not found")
		}
		id = n
	}
	c, ok := s.st.chats[id]
	if !ok {
		return nil, badRequest("chat not found")
	}
	return c, nil
}

// writableLocked applies the refusals of sending into c.
func (s *Server) writableLocked(c *chatState) *apiError {
	if c.migratedTo != 0 {
		e := badRequest("group chat was upgraded to a supergroup chat")
		e.migrateTo = c.migratedTo
		return e
	}
	switch c.Type {
	case ChatPrivate:
		u := s.st.users[c.UserID]
		if u.deactivated {
			return forbidden("user is deactivated")
		}
		if u.blocked {
			return forbidden("bot was blocked by the user")
		}
	case ChatGroup:
		if c.kicked {
			return forbidden("bot was kicked from the group chat")
		}
	case ChatSupergroup:
		if c.kicked {
			return forbidden("bot was kicked from the supergroup chat")
		}
	case ChatChannel:
		if c.kicked {
			return forbidden("bot is not a member of the channel chat")
		}
	}
	return nil
}
