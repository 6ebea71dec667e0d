package telegramtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Location is a point on the map, as a message carries it.
type Location struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
}

type apiContact struct {
	PhoneNumber string `json:"phone_number"`
	FirstName   string `json:"first_name"`
	LastName    string `json:"last_name,omitempty"`
}

type apiVenue struct {
	Location Location `json:"location"`
	Title    string   `json:"title"`
	Address  string   `json:"address"`
}

type apiDice struct {
	Emoji string `json:"emoji"`
	Value int    `json:"value"`
}

type apiPollOption struct {
	Text       string `json:"text"`
	VoterCount int    `json:"voter_count"`
}

type apiPoll struct {
	ID                    string          `json:"id"`
	Question              string          `json:"question"`
	Options               []apiPollOption `json:"options"`
	TotalVoterCount       int             `json:"total_voter_count"`
	IsClosed              bool            `json:"is_closed"`
	IsAnonymous           bool            `json:"is_anonymous"`
	Type                  string          `json:"type"`
	AllowsMultipleAnswers bool            `json:"allows_multiple_answers"`
	CorrectOptionID       *int            `json:"correct_option_id,omitempty"`
}

type botCommand struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// chatActions are sendChatAction's valid actions.
var chatActions = []string{"typing", "upload_photo", "record_video", "upload_video", "record_voice",
	"upload_voice", "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note"}

func (s *Server) chatActionLocked(p params) (any, *apiError) {
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	_ = c
	if a := p.get("action"); !slices.Contains(chatActions, a) {
		if a == "" {
			return nil, badRequest("action is empty")
		}
		return nil, badRequest("wrong parameter action in request")
	}
	return true, nil
}

func (s *Server) sendLocationLocked(p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, true)
	if e != nil {
		return nil, e
	}
	loc, e := locationParams(p)
	if e != nil {
		return nil, e
	}
	m := &storedMsg{kind: msgLocation, extra: &loc}
	if e := s.acceptLocked("sendLocation", o, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(o.c, m), nil
}

// locationParams reads latitude and longitude as Telegram checks them.
func locationParams(p params) (Location, *apiError) {
	lat, err1 := strconv.ParseFloat(strings.TrimSpace(p.get("latitude")), 64)
	lon, err2 := strconv.ParseFloat(strings.TrimSpace(p.get("longitude")), 64)
	if err1 != nil || lat < -90 || lat > 90 {
		return Location{}, badRequest("wrong latitude specified")
	}
	if err2 != nil || lon < -180 || lon > 180 {
		return Location{}, badRequest("wrong longitude specified")
	}
	return Location{Latitude: lat, Longitude: lon}, nil
}

func (s *Server) sendContactLocked(p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, true)
	if e != nil {
		return nil, e
	}
	c := &apiContact{PhoneNumber: p.get("phone_number"), FirstName: p.get("first_name"), LastName: p.get("last_name")}
	if strings.TrimSpace(c.PhoneNumber) == "" {
		return nil, badRequest("phone number is empty")
	}
	if strings.TrimSpace(c.FirstName) == "" {
		return nil, badRequest("contact first name is empty")
	}
	m := &storedMsg{kind: msgContact, extra: c}
	if e := s.acceptLocked("sendContact", o, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(o.c, m), nil
}

func (s *Server) sendVenueLocked(p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, true)
	if e != nil {
		return nil, e
	}
	loc, e := locationParams(p)
	if e != nil {
		return nil, e
	}
	v := &apiVenue{Location: loc, Title: p.get("title"), Address: p.get("address")}
	if strings.TrimSpace(v.Title) == "" || strings.TrimSpace(v.Address) == "" {
		return nil, badRequest("venue title and address must be non-empty")
	}
	m := &storedMsg{kind: msgVenue, text: v.Title, sent: v.Title, extra: v}
	if e := s.acceptLocked("sendVenue", o, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(o.c, m), nil
}

func (s *Server) profilePhotosLocked(p params) (any, *apiError) {
	id, ok, err := p.int64("user_id")
	if err != nil || !ok {
		return nil, badRequest("user_id is empty")
	}
	if _, ok := s.st.users[id]; !ok && id != s.botID {
		return nil, badRequest("user not found")
	}
	return map[string]any{"total_count": 0, "photos": [][]apiPhotoSize{}}, nil
}

// diceMax is the highest value of each dice emoji.
var diceMax = map[string]int{"🎲": 6, "🎯": 6, "🎳": 6, "🏀": 5, "⚽": 5, "🎰": 64}

func (s *Server) sendDiceLocked(p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, true)
	if e != nil {
		return nil, e
	}
	emoji := p.get("emoji")
	if emoji == "" {
		emoji = "🎲"
	}
	top, ok := diceMax[emoji]
	if !ok {
		return nil, badRequest("invalid dice emoji specified")
	}
	m := &storedMsg{kind: msgDice, text: emoji, sent: emoji, extra: &apiDice{Emoji: emoji, Value: 1 + s.rng.IntN(top)}}
	if e := s.acceptLocked("sendDice", o, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(o.c, m), nil
}

func (s *Server) sendPollLocked(p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, true)
	if e != nil {
		return nil, e
	}
	q := p.get("question")
	if strings.TrimSpace(q) == "" || utf8.RuneCountInString(q) > 300 {
		return nil, badRequest("poll question length must be 1-300")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(p.get("options")), &raw); err != nil {
		return nil, badRequest("can't parse options JSON array")
	}
	if len(raw) < 2 || len(raw) > 12 {
		return nil, badRequest("poll must have 2-12 options")
	}
	poll := &apiPoll{Question: q, IsAnonymous: true, Type: "regular"}
	for _, r := range raw {
		var text string
		if json.Unmarshal(r, &text) != nil {
			var opt struct {
				Text string `json:"text"`
			}
			json.Unmarshal(r, &opt)
			text = opt.Text
		}
		if strings.TrimSpace(text) == "" || utf8.RuneCountInString(text) > 100 {
			return nil, badRequest("poll options length must not exceed 100")
		}
		poll.Options = append(poll.Options, apiPollOption{Text: text})
	}
	if p.has("is_anonymous") {
		poll.IsAnonymous = p.bool("is_anonymous")
	}
	poll.AllowsMultipleAnswers = p.bool("allows_multiple_answers")
	if t := p.get("type"); t == "quiz" {
		poll.Type = t
		n, ok, err := p.int64("correct_option_id")
		if err != nil || !ok || n < 0 || int(n) >= len(poll.Options) {
			return nil, badRequest("wrong correct option ID specified")
		}
		i := int(n)
		poll.CorrectOptionID = &i
	} else if t != "" && t != "regular" {
		return nil, badRequest("wrong poll type specified")
	}
	s.st.nextFile++
	poll.ID = fmt.Sprintf("5%018d", s.st.nextFile)
	m := &storedMsg{kind: msgPoll, text: q, sent: q, extra: poll}
	if e := s.acceptLocked("sendPoll", o, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(o.c, m), nil
}

// reactionEmoji are the emoji a bot may react with.
var reactionEmoji = strings.Fields("👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤‍🔥 🌚 🌭 💯 🤣 ⚡ 🍌 🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 🆒 💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂ 🤷 🤷‍♀ 😡")

func (s *Server) reactionLocked(p params) (any, *apiError) {
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	if _, e := s.messageIn(c, p, "MESSAGE_ID_INVALID"); e != nil {
		return nil, e
	}
	var rs []struct {
		Type  string `json:"type"`
		Emoji string `json:"emoji"`
	}
	if raw := p.get("reaction"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &rs); err != nil {
			return nil, badRequest("can't parse reaction types JSON array")
		}
	}
	if len(rs) > 1 {
		return nil, badRequest("REACTIONS_TOO_MANY")
	}
	for _, r := range rs {
		if r.Type != "emoji" || !slices.Contains(reactionEmoji, strings.TrimSuffix(r.Emoji, "\ufe0f")) {
			return nil, badRequest("REACTION_INVALID")
		}
	}
	return true, nil
}

func (s *Server) pinLocked(p params) (any, *apiError) {
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	m, e := s.messageIn(c, p, "message to pin not found")
	if e != nil {
		return nil, e
	}
	c.pinned = append(slices.DeleteFunc(c.pinned, func(id int64) bool { return id == m.id }), m.id)
	return true, nil
}

func (s *Server) unpinLocked(p params) (any, *apiError) {
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	id, ok, err := p.int64("message_id")
	if err != nil {
		return nil, badRequest("message_id is invalid")
	}
	if !ok {
		if len(c.pinned) > 0 {
			c.pinned = c.pinned[:len(c.pinned)-1]
		}
		return true, nil
	}
	if !slices.Contains(c.pinned, id) {
		return nil, badRequest("message to unpin not found")
	}
	c.pinned = slices.DeleteFunc(c.pinned, func(x int64) bool { return x == id })
	return true, nil
}

func (s *Server) unpinAllLocked(p params) (any, *apiError) {
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	c.pinned = nil
	return true, nil
}

// readableChatLocked is the chat named by chat_id when the bot may read
// it: refused when the group moved or the bot was removed.
func (s *Server) readableChatLocked(p params) (*chatState, *apiError) {
	c, e := s.lookupChatLocked(p, "chat_id")
	if e != nil {
		return nil, e
	}
	if c.migratedTo != 0 || c.kicked {
		return nil, s.writableLocked(c)
	}
	return c, nil
}

type apiChatFull struct {
	apiChat
	AccentColorID    int         `json:"accent_color_id"`
	MaxReactionCount int         `json:"max_reaction_count"`
	PinnedMessage    *apiMessage `json:"pinned_message,omitempty"`
	Permissions      any         `json:"permissions,omitempty"`
}

func (s *Server) getChatLocked(p params) (any, *apiError) {
	c, e := s.readableChatLocked(p)
	if e != nil {
		return nil, e
	}
	full := apiChatFull{apiChat: s.apiChatOf(c), AccentColorID: int(c.ID % 7), MaxReactionCount: 11}
	if full.AccentColorID < 0 {
		full.AccentColorID = -full.AccentColorID
	}
	if n := len(c.pinned); n > 0 {
		if m, ok := c.msgs[c.pinned[n-1]]; ok {
			full.PinnedMessage = s.apiMessageFlat(c, m)
		}
	}
	if c.Type == ChatGroup || c.Type == ChatSupergroup {
		full.Permissions = map[string]bool{"can_send_messages": true, "can_send_photos": true, "can_pin_messages": true}
	}
	return full, nil
}

type apiChatMember struct {
	Status      string   `json:"status"`
	User        *apiUser `json:"user"`
	IsAnonymous *bool    `json:"is_anonymous,omitempty"`
	// Administrator rights, for the bot in a channel.
	CanBeEdited         *bool `json:"can_be_edited,omitempty"`
	CanManageChat       *bool `json:"can_manage_chat,omitempty"`
	CanPostMessages     *bool `json:"can_post_messages,omitempty"`
	CanEditMessages     *bool `json:"can_edit_messages,omitempty"`
	CanDeleteMessages   *bool `json:"can_delete_messages,omitempty"`
	CanManageVideoChats *bool `json:"can_manage_video_chats,omitempty"`
	CanRestrictMembers  *bool `json:"can_restrict_members,omitempty"`
	CanPromoteMembers   *bool `json:"can_promote_members,omitempty"`
	CanChangeInfo       *bool `json:"can_change_info,omitempty"`
	CanInviteUsers      *bool `json:"can_invite_users,omitempty"`
	CanPostStories      *bool `json:"can_post_stories,omitempty"`
	CanEditStories      *bool `json:"can_edit_stories,omitempty"`
	CanDeleteStories    *bool `json:"can_delete_stories,omitempty"`
}

func (s *Server) memberOfLocked(c *chatState, userID int64) (apiChatMember, *apiError) {
	f, t := false, true
	if userID == s.botID {
		m := apiChatMember{Status: "member", User: s.botUser(false)}
		if c.Type == ChatChannel {
			m.Status = "administrator"
			m.CanBeEdited, m.IsAnonymous, m.CanManageChat, m.CanPostMessages, m.CanEditMessages = &f, &f, &t, &t, &t
			m.CanDeleteMessages, m.CanManageVideoChats, m.CanRestrictMembers, m.CanPromoteMembers = &t, &f, &f, &f
			m.CanChangeInfo, m.CanInviteUsers, m.CanPostStories, m.CanEditStories, m.CanDeleteStories = &f, &t, &f, &f, &f
		}
		return m, nil
	}
	u, ok := s.st.users[userID]
	if !ok {
		return apiChatMember{}, badRequest("user not found")
	}
	m := apiChatMember{Status: "left", User: apiUserOf(u)}
	switch {
	case c.creator == userID:
		m.Status, m.IsAnonymous = "creator", &f
	case c.members[userID]:
		m.Status = "member"
	}
	return m, nil
}

func (s *Server) getChatMemberLocked(p params) (any, *apiError) {
	c, e := s.readableChatLocked(p)
	if e != nil {
		return nil, e
	}
	id, ok, err := p.int64("user_id")
	if err != nil || !ok {
		return nil, badRequest("user_id is empty")
	}
	m, e := s.memberOfLocked(c, id)
	if e != nil {
		return nil, e
	}
	return m, nil
}

func (s *Server) memberCountLocked(p params) (any, *apiError) {
	c, e := s.readableChatLocked(p)
	if e != nil {
		return nil, e
	}
	return len(c.members) + 1, nil // and the bot
}

func (s *Server) adminsLocked(p params) (any, *apiError) {
	c, e := s.readableChatLocked(p)
	if e != nil {
		return nil, e
	}
	if c.Type == ChatPrivate {
		return nil, badRequest("there are no administrators in the private chat")
	}
	out := []apiChatMember{}
	if c.creator != 0 {
		m, _ := s.memberOfLocked(c, c.creator)
		out = append(out, m)
	}
	if c.Type == ChatChannel {
		m, _ := s.memberOfLocked(c, s.botID)
		out = append(out, m)
	}
	return out, nil
}

var commandShape = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// scopeKey names a command scope and language, for setMyCommands and its
// siblings.
func scopeKey(p params) (string, *apiError) {
	scope := struct {
		Type   string          `json:"type"`
		ChatID json.RawMessage `json:"chat_id"`
		UserID int64           `json:"user_id"`
	}{Type: "default"}
	if raw := strings.TrimSpace(p.get("scope")); raw != "" {
		if err := json.Unmarshal([]byte(raw), &scope); err != nil {
			return "", badRequest("can't parse BotCommandScope JSON object")
		}
	}
	switch scope.Type {
	case "default", "all_private_chats", "all_group_chats", "all_chat_administrators", "chat", "chat_administrators", "chat_member":
	default:
		return "", badRequest("wrong bot command scope type specified")
	}
	lang := p.get("language_code")
	if lang != "" && !regexp.MustCompile(`^[a-z]{2}$`).MatchString(lang) {
		return "", badRequest("invalid language code specified")
	}
	return fmt.Sprintf("%s/%s/%d/%s", scope.Type, scope.ChatID, scope.UserID, lang), nil
}

func (s *Server) setCommandsLocked(p params) (any, *apiError) {
	var cmds []botCommand
	if err := json.Unmarshal([]byte(p.get("commands")), &cmds); err != nil {
		return nil, badRequest("can't parse commands JSON array")
	}
	if len(cmds) > 100 {
		return nil, badRequest("BOT_COMMANDS_TOO_MUCH")
	}
	for _, c := range cmds {
		if !commandShape.MatchString(c.Command) {
			return nil, badRequest("BOT_COMMAND_INVALID")
		}
		if n := utf8.RuneCountInString(strings.TrimSpace(c.Description)); n < 1 || n > 256 {
			return nil, badRequest("BOT_COMMAND_DESCRIPTION_INVALID")
		}
	}
	key, e := scopeKey(p)
	if e != nil {
		return nil, e
	}
	if len(cmds) == 0 {
		delete(s.st.commands, key)
	} else {
		s.st.commands[key] = cmds
	}
	return true, nil
}

func (s *Server) getCommandsLocked(p params) (any, *apiError) {
	key, e := scopeKey(p)
	if e != nil {
		return nil, e
	}
	out := s.st.commands[key]
	if out == nil {
		out = []botCommand{}
	}
	return out, nil
}

func (s *Server) deleteCommandsLocked(p params) (any, *apiError) {
	key, e := scopeKey(p)
	if e != nil {
		return nil, e
	}
	delete(s.st.commands, key)
	return true, nil
}

func (s *Server) setMenuButtonLocked(p params) (any, *apiError) {
	var chatID int64
	if p.get("chat_id") != "" {
		c, e := s.lookupChatLocked(p, "chat_id")
		if e != nil {
			return nil, e
		}
		if c.Type != ChatPrivate {
			return nil, badRequest("chat_id must be a private chat")
		}
		chatID = c.ID
	}
	raw := strings.TrimSpace(p.get("menu_button"))
	if raw == "" {
		delete(s.st.menuButtons, chatID)
		return true, nil
	}
	var mb struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(raw), &mb); err != nil {
		return nil, badRequest("can't parse menu button JSON object")
	}
	switch mb.Type {
	case "commands", "default", "web_app":
	default:
		return nil, badRequest("wrong menu button type specified")
	}
	s.st.menuButtons[chatID] = json.RawMessage(raw)
	return true, nil
}

func (s *Server) getMenuButtonLocked(p params) (any, *apiError) {
	var chatID int64
	if p.get("chat_id") != "" {
		c, e := s.lookupChatLocked(p, "chat_id")
		if e != nil {
			return nil, e
		}
		chatID = c.ID
	}
	if mb, ok := s.st.menuButtons[chatID]; ok {
		return mb, nil
	}
	if mb, ok := s.st.menuButtons[0]; ok {
		return mb, nil
	}
	return map[string]string{"type": "default"}, nil
}

func (s *Server) getBotTextLocked(field string, p params) (any, *apiError) {
	v, ok := s.st.botTexts[field+"/"+p.get("language_code")]
	if !ok {
		v = s.st.botTexts[field+"/"]
	}
	if field == "name" && v == "" {
		v = s.cfg.BotName
	}
	return map[string]string{field: v}, nil
}

func (s *Server) setBotTextLocked(field string, limit int, p params) (any, *apiError) {
	v := p.get(field)
	if utf8.RuneCountInString(v) > limit {
		return nil, badRequest(fmt.Sprintf("bot %s is too long", strings.ReplaceAll(field, "_", " ")))
	}
	key := field + "/" + p.get("language_code")
	if v == "" {
		delete(s.st.botTexts, key)
	} else {
		s.st.botTexts[key] = v
	}
	return true, nil
}
