package telegramtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tgrelay/tgrelay/tghtml"
)

type apiUser struct {
	ID                      int64  `json:"id"`
	IsBot                   bool   `json:"is_bot"`
	FirstName               string `json:"first_name"`
	LastName                string `json:"last_name,omitempty"`
	Username                string `json:"username,omitempty"`
	LanguageCode            string `json:"language_code,omitempty"`
	CanJoinGroups           *bool  `json:"can_join_groups,omitempty"`
	CanReadAllGroupMessages *bool  `json:"can_read_all_group_messages,omitempty"`
	SupportsInlineQueries   *bool  `json:"supports_inline_queries,omitempty"`
	CanConnectToBusiness    *bool  `json:"can_connect_to_business,omitempty"`
	HasMainWebApp           *bool  `json:"has_main_web_app,omitempty"`
}

type apiChat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
}

type apiPhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type apiDocument struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type apiVideo struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width,omitempty"`
	Height       int    `json:"height,omitempty"`
	Duration     int    `json:"duration"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type apiSticker struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Type         string `json:"type"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	IsAnimated   bool   `json:"is_animated"`
	IsVideo      bool   `json:"is_video"`
	Emoji        string `json:"emoji,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type apiOrigin struct {
	Type       string   `json:"type"`
	Date       int64    `json:"date"`
	SenderUser *apiUser `json:"sender_user,omitempty"`
	Chat       *apiChat `json:"chat,omitempty"`
}

type apiMessage struct {
	MessageID       int64          `json:"message_id"`
	MessageThreadID int64          `json:"message_thread_id,omitempty"`
	From            *apiUser       `json:"from,omitempty"`
	SenderChat      *apiChat       `json:"sender_chat,omitempty"`
	Chat            apiChat        `json:"chat"`
	Date            int64          `json:"date"`
	EditDate        int64          `json:"edit_date,omitempty"`
	ForwardOrigin   *apiOrigin     `json:"forward_origin,omitempty"`
	ReplyToMessage  *apiMessage    `json:"reply_to_message,omitempty"`
	MediaGroupID    string         `json:"media_group_id,omitempty"`
	Text            string         `json:"text,omitempty"`
	Entities        []Entity       `json:"entities,omitempty"`
	Caption         string         `json:"caption,omitempty"`
	CaptionEntities []Entity       `json:"caption_entities,omitempty"`
	Photo           []apiPhotoSize `json:"photo,omitempty"`
	Document        *apiDocument   `json:"document,omitempty"`
	Video           *apiVideo      `json:"video,omitempty"`
	Audio           *apiVideo      `json:"audio,omitempty"`
	Sticker         *apiSticker    `json:"sticker,omitempty"`
	Voice           *apiVideo      `json:"voice,omitempty"`
	Animation       *apiVideo      `json:"animation,omitempty"`
	Contact         *apiContact    `json:"contact,omitempty"`
	Venue           *apiVenue      `json:"venue,omitempty"`
	Location        *Location      `json:"location,omitempty"`
	Dice            *apiDice       `json:"dice,omitempty"`
	Poll            *apiPoll       `json:"poll,omitempty"`
	Invoice         *apiInvoice    `json:"invoice,omitempty"`
	// SuccessfulPayment is set on the service message of a payment.
	SuccessfulPayment *apiSuccessfulPayment `json:"successful_payment,omitempty"`
	ReplyMarkup       json.RawMessage       `json:"reply_markup,omitempty"`
}

// methodFunc runs one Bot API method with Server.mu held.
type methodFunc func(s *Server, p params) (any, *apiError)

// methods are the Bot API methods the server implements, by lower-case
// name (Telegram's method names are case-insensitive). getUpdates, which
// waits, is handled apart.
var methods = map[string]methodFunc{
	"getme":                  func(s *Server, _ params) (any, *apiError) { return s.botUser(true), nil },
	"sendmessage":            (*Server).sendMessageLocked,
	"sendphoto":              func(s *Server, p params) (any, *apiError) { return s.sendFileLocked("sendPhoto", msgPhoto, p) },
	"senddocument":           func(s *Server, p params) (any, *apiError) { return s.sendFileLocked("sendDocument", msgDocument, p) },
	"sendvideo":              func(s *Server, p params) (any, *apiError) { return s.sendFileLocked("sendVideo", msgVideo, p) },
	"sendaudio":              func(s *Server, p params) (any, *apiError) { return s.sendFileLocked("sendAudio", msgAudio, p) },
	"sendsticker":            func(s *Server, p params) (any, *apiError) { return s.sendFileLocked("sendSticker", msgSticker, p) },
	"sendvoice":              func(s *Server, p params) (any, *apiError) { return s.sendFileLocked("sendVoice", msgVoice, p) },
	"sendanimation":          func(s *Server, p params) (any, *apiError) { return s.sendFileLocked("sendAnimation", msgAnim, p) },
	"sendcontact":            (*Server).sendContactLocked,
	"sendvenue":              (*Server).sendVenueLocked,
	"getuserprofilephotos":   (*Server).profilePhotosLocked,
	"sendmediagroup":         (*Server).sendMediaGroupLocked,
	"sendlocation":           (*Server).sendLocationLocked,
	"senddice":               (*Server).sendDiceLocked,
	"sendpoll":               (*Server).sendPollLocked,
	"copymessage":            func(s *Server, p params) (any, *apiError) { return s.copyLocked("copymessage", p) },
	"forwardmessage":         func(s *Server, p params) (any, *apiError) { return s.copyLocked("forwardmessage", p) },
	"editmessagetext":        (*Server).editTextLocked,
	"editmessagecaption":     (*Server).editCaptionLocked,
	"editmessagereplymarkup": (*Server).editMarkupLocked,
	"deletemessage":          (*Server).deleteLocked,
	"deletemessages":         (*Server).deleteManyLocked,
	"answercallbackquery":    deadlined("callback_query_id", (*Server).answerCallbackLocked),
	"answerinlinequery":      deadlined("inline_query_id", (*Server).answerInlineLocked),
	"answerprecheckoutquery": deadlined("pre_checkout_query_id", (*Server).answerPreCheckoutLocked),
	"sendinvoice":            (*Server).sendInvoiceLocked,
	"sendchataction":         (*Server).chatActionLocked,
	"setmessagereaction":     (*Server).reactionLocked,
	"pinchatmessage":         (*Server).pinLocked,
	"unpinchatmessage":       (*Server).unpinLocked,
	"unpinallchatmessages":   (*Server).unpinAllLocked,
	"getchat":                (*Server).getChatLocked,
	"getchatmember":          (*Server).getChatMemberLocked,
	"getchatmembercount":     (*Server).memberCountLocked,
	"getchatmemberscount":    (*Server).memberCountLocked, // the old name, still served
	"getchatadministrators":  (*Server).adminsLocked,
	"getfile":                (*Server).getFileLocked,
	"setmycommands":          (*Server).setCommandsLocked,
	"getmycommands":          (*Server).getCommandsLocked,
	"deletemycommands":       (*Server).deleteCommandsLocked,
	"setchatmenubutton":      (*Server).setMenuButtonLocked,
	"getchatmenubutton":      (*Server).getMenuButtonLocked,
	"getmyname":              func(s *Server, p params) (any, *apiError) { return s.getBotTextLocked("name", p) },
	"setmyname":              func(s *Server, p params) (any, *apiError) { return s.setBotTextLocked("name", 64, p) },
	"getmydescription":       func(s *Server, p params) (any, *apiError) { return s.getBotTextLocked("description", p) },
	"setmydescription":       func(s *Server, p params) (any, *apiError) { return s.setBotTextLocked("description", 512, p) },
	"getmyshortdescription":  func(s *Server, p params) (any, *apiError) { return s.getBotTextLocked("short_description", p) },
	"setmyshortdescription":  func(s *Server, p params) (any, *apiError) { return s.setBotTextLocked("short_description", 120, p) },
	"setwebhook":             (*Server).setWebhookLocked,
	"deletewebhook":          (*Server).deleteWebhookLocked,
	"getwebhookinfo":         func(s *Server, _ params) (any, *apiError) { return s.webhookInfoLocked(), nil },
	"getmydefaultadministratorrights": func(s *Server, _ params) (any, *apiError) {
		return map[string]bool{"is_anonymous": false, "can_manage_chat": false, "can_delete_messages": false,
			"can_manage_video_chats": false, "can_restrict_members": false, "can_promote_members": false,
			"can_change_info": false, "can_invite_users": false, "can_post_stories": false,
			"can_edit_stories": false, "can_delete_stories": false}, nil
	},
}

// knownMethod reports whether the server implements method.
func knownMethod(method string) bool {
	m := strings.ToLower(method)
	_, ok := methods[m]
	return ok || m == "getupdates"
}

// notImplemented is the answer to a method the fake does not implement:
// Telegram's 404, with a description that says why.
func notImplemented(method string) *apiError {
	return &apiError{code: 404, desc: fmt.Sprintf("Not Found: method %q is not implemented by telegramtest, tgrelay's fake Bot API", method)}
}

// call runs one Bot API method.
func (s *Server) call(ctx context.Context, method string, p params) (any, *apiError) {
	m := strings.ToLower(method)
	if m == "getupdates" {
		return s.getUpdates(ctx, p)
	}
	f, ok := methods[m]
	if !ok {
		return nil, notImplemented(method)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return f(s, p)
}

func (s *Server) botUser(full bool) *apiUser {
	u := &apiUser{ID: s.botID, IsBot: true, FirstName: s.cfg.BotName, Username: s.cfg.BotUsername}
	if full {
		t, f := true, false
		u.CanJoinGroups, u.CanReadAllGroupMessages, u.SupportsInlineQueries = &t, &f, &t
		u.CanConnectToBusiness, u.HasMainWebApp = &f, &f
	}
	return u
}

func (s *Server) apiChatOf(c *chatState) apiChat {
	ac := apiChat{ID: c.ID, Type: string(c.Type), Title: c.Title, Username: c.Username}
	if c.Type == ChatPrivate {
		u := s.st.users[c.UserID]
		ac.FirstName, ac.LastName, ac.Username = u.FirstName, u.LastName, u.Username
	}
	return ac
}

func apiUserOf(u *userState) *apiUser {
	return &apiUser{ID: u.ID, FirstName: u.FirstName, LastName: u.LastName, Username: u.Username, LanguageCode: u.LanguageCode}
}

// apiMessageOf is m as Telegram shows it, with the message it replies to
// (one level deep, as Telegram nests it) when that still exists.
func (s *Server) apiMessageOf(c *chatState, m *storedMsg) *apiMessage {
	am := s.apiMessageFlat(c, m)
	if r, ok := c.msgs[m.replyTo]; ok && m.replyTo != 0 {
		am.ReplyToMessage = s.apiMessageFlat(c, r)
	}
	return am
}

func (s *Server) apiMessageFlat(c *chatState, m *storedMsg) *apiMessage {
	am := &apiMessage{
		MessageID: m.id, MessageThreadID: m.threadID, Chat: s.apiChatOf(c),
		Date: m.date, EditDate: m.editDate, ReplyMarkup: m.markup, MediaGroupID: m.mediaGroup,
	}
	switch {
	case m.fromBot && c.Type == ChatChannel:
		sc := s.apiChatOf(c)
		am.SenderChat = &sc
	case m.fromBot:
		am.From = s.botUser(false)
	default:
		am.From = apiUserOf(s.st.users[m.fromUser])
	}
	if m.hasMedia() {
		am.Caption, am.CaptionEntities = m.text, m.entities
	} else {
		am.Text, am.Entities = m.text, m.entities
	}
	f := m.file
	switch m.kind {
	case msgPhoto:
		am.Photo = []apiPhotoSize{{FileID: f.id, FileUniqueID: f.unique, Width: 800, Height: 600, FileSize: f.size}}
	case msgDocument:
		am.Document = &apiDocument{FileID: f.id, FileUniqueID: f.unique, FileName: f.name, MimeType: f.mime, FileSize: f.size}
	case msgVideo:
		am.Video = &apiVideo{FileID: f.id, FileUniqueID: f.unique, Width: 640, Height: 360, Duration: 1, FileName: f.name, MimeType: f.mime, FileSize: f.size}
	case msgAudio:
		am.Audio = &apiVideo{FileID: f.id, FileUniqueID: f.unique, Duration: 1, FileName: f.name, MimeType: f.mime, FileSize: f.size}
	case msgSticker:
		am.Sticker = &apiSticker{FileID: f.id, FileUniqueID: f.unique, Type: "regular", Width: 512, Height: 512, FileSize: f.size}
	case msgVoice:
		am.Voice = &apiVideo{FileID: f.id, FileUniqueID: f.unique, Duration: 1, MimeType: f.mime, FileSize: f.size}
	case msgAnim:
		am.Animation = &apiVideo{FileID: f.id, FileUniqueID: f.unique, Width: 320, Height: 240, Duration: 1, FileName: f.name, MimeType: f.mime, FileSize: f.size}
	case msgContact:
		am.Contact = m.extra.(*apiContact)
	case msgVenue:
		v := m.extra.(*apiVenue)
		am.Venue, am.Location = v, &v.Location
	case msgLocation:
		am.Location = m.extra.(*Location)
	case msgDice:
		am.Dice = m.extra.(*apiDice)
	case msgPoll:
		am.Poll = m.extra.(*apiPoll)
	case msgInvoice:
		am.Invoice = m.extra.(*apiInvoice)
	case msgPayment:
		am.SuccessfulPayment = m.extra.(*apiSuccessfulPayment)
	}
	return am
}

// describeProblem words a tghtml problem as Telegram does.
func describeProblem(p *tghtml.Problem) string {
	switch p.Kind {
	case tghtml.ProblemUnsupportedTag:
		return fmt.Sprintf("Unsupported start tag %q at byte offset %d", p.Tag, p.Offset)
	case tghtml.ProblemUnmatchedEndTag:
		return fmt.Sprintf("Unexpected end tag at byte offset %d", p.Offset)
	case tghtml.ProblemUnclosedTag:
		return fmt.Sprintf("Can't find end tag corresponding to start tag %q", p.Tag)
	default:
		return fmt.Sprintf("Unsupported entity or reserved character at byte offset %d", p.Offset)
	}
}

// textParams reads a text (caption false) or a caption with its
// parse_mode and entities parameter, and returns the text a reader sees
// with its entities.
func textParams(p params, key, parseKey, entitiesKey string, caption bool) (string, []Entity, *apiError) {
	plain, ents, e := formatText(p.get(key), p.get(parseKey), p.get(entitiesKey))
	if e != nil {
		return "", nil, e
	}
	if caption {
		if tghtml.Len(plain) > MaxCaptionLength {
			return "", nil, badRequest("message caption is too long")
		}
		return plain, ents, nil
	}
	if strings.TrimSpace(plain) == "" {
		return "", nil, badRequest("message text is empty")
	}
	if tghtml.Len(plain) > MaxTextLength {
		return "", nil, badRequest("message is too long")
	}
	return plain, ents, nil
}

// outgoing is what every sending method shares: the target chat, thread,
// reply and reply markup.
type outgoing struct {
	c         *chatState
	thread    int64
	replyTo   int64
	rawMarkup json.RawMessage
	markup    json.RawMessage
}

// outgoingLocked reads the parameters every sending method shares and
// applies their refusals. withMarkup is false for methods that take no
// reply_markup (sendMediaGroup).
func (s *Server) outgoingLocked(p params, withMarkup bool) (outgoing, *apiError) {
	var o outgoing
	c, e := s.targetChatLocked(p)
	if e != nil {
		return o, e
	}
	o.c = c
	n, _, err := p.int64("message_thread_id")
	if err != nil {
		return o, badRequest("message_thread_id is invalid")
	}
	o.thread = n
	replyTo, _, err := p.int64("reply_to_message_id")
	if err != nil {
		return o, badRequest("reply_to_message_id is invalid")
	}
	allowWithout := p.bool("allow_sending_without_reply")
	if rp, set, e := replyParameters(p); e != nil {
		return o, e
	} else if set {
		replyTo, allowWithout = rp.MessageID, rp.AllowSendingWithoutReply
	}
	if replyTo != 0 {
		if _, ok := c.msgs[replyTo]; ok {
			o.replyTo = replyTo
		} else if !allowWithout {
			return o, badRequest("message to be replied not found")
		}
	}
	if withMarkup {
		if o.rawMarkup, o.markup, e = checkMarkup(p); e != nil {
			return o, e
		}
	}
	return o, nil
}

// acceptLocked is the common end of every sending method: ledger
// capacity, rate limits, then the effect. A refused send has no effect.
func (s *Server) acceptLocked(method string, o outgoing, ms ...*storedMsg) *apiError {
	if len(s.st.ledger)+len(ms) > s.cfg.MaxMessages || s.st.stored+len(ms) > s.cfg.MaxMessages {
		return &apiError{code: 500, desc: "Internal Server Error: telegramtest message ledger full (Config.MaxMessages)"}
	}
	if e := s.rateCheckLocked(o.c); e != nil {
		return e
	}
	for _, m := range ms {
		m.fromBot, m.threadID, m.replyTo = true, o.thread, o.replyTo
		if m.markup == nil {
			m.markup = o.markup
		}
		s.storeLocked(o.c, m)
		s.recordLocked(method, o.c, m, o.rawMarkup)
	}
	return nil
}

func (s *Server) storeLocked(c *chatState, m *storedMsg) {
	c.nextMsgID++
	m.id = c.nextMsgID
	m.date = s.now().Unix()
	c.msgs[m.id] = m
	s.st.stored++
}

// recordLocked adds m to the ledger, with the reply markup as sent, and
// wakes WaitMessages.
func (s *Server) recordLocked(method string, c *chatState, m *storedMsg, rawMarkup json.RawMessage) {
	s.st.ledger = append(s.st.ledger, Message{
		ChatID: c.ID, MessageID: m.id, ThreadID: m.threadID, Method: method,
		Text: m.sent, PlainText: m.text, Entities: m.entities, ReplyTo: m.replyTo, ReplyMarkup: rawMarkup,
		Time: s.now(),
	})
	s.pokeLocked()
}

// targetChatLocked returns the chat named by chat_id when the bot may
// write to it, or the refusal Telegram gives.
func (s *Server) targetChatLocked(p params) (*chatState, *apiError) {
	c, e := s.lookupChatLocked(p, "chat_id")
	if e != nil {
		return nil, e
	}
	if e := s.writableLocked(c); e != nil {
		return nil, e
	}
	return c, nil
}

func (s *Server) sendMessageLocked(p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, true)
	if e != nil {
		return nil, e
	}
	text, ents, e := textParams(p, "text", "parse_mode", "entities", false)
	if e != nil {
		return nil, e
	}
	if e := checkLinkPreview(p); e != nil {
		return nil, e
	}
	m := &storedMsg{kind: msgText, text: text, sent: p.get("text"), entities: ents}
	if e := s.acceptLocked("sendMessage", o, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(o.c, m), nil
}

// fileKinds are the getFile directories of each media kind.
var fileKinds = map[string]string{msgPhoto: "photos", msgDocument: "documents", msgVideo: "videos", msgAudio: "music",
	msgSticker: "stickers", msgVoice: "voice", msgAnim: "animations"}

func (s *Server) sendFileLocked(method, kind string, p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, true)
	if e != nil {
		return nil, e
	}
	f, e := s.inputFileLocked(p, kind, p.get(kind), fileKinds[kind])
	if e != nil {
		return nil, e
	}
	m := &storedMsg{kind: kind, file: f}
	if kind != msgSticker {
		if m.text, m.entities, e = textParams(p, "caption", "parse_mode", "caption_entities", true); e != nil {
			return nil, e
		}
		m.sent = p.get("caption")
	}
	if e := s.acceptLocked(method, o, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(o.c, m), nil
}

func (s *Server) sendMediaGroupLocked(p params) (any, *apiError) {
	o, e := s.outgoingLocked(p, false)
	if e != nil {
		return nil, e
	}
	var media []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(p.get("media")), &media); err != nil {
		return nil, badRequest("can't parse media JSON array")
	}
	if len(media) < 2 || len(media) > 10 {
		return nil, badRequest("media must include 2-10 items")
	}
	var ms []*storedMsg
	docs := 0
	for i, item := range media {
		str := func(k string) string {
			var v string
			json.Unmarshal(item[k], &v)
			return v
		}
		kind := str("type")
		switch kind {
		case msgPhoto, msgVideo, msgDocument, msgAudio:
		default:
			return nil, badRequest(fmt.Sprintf("can't parse InputMedia: media type %q is invalid", kind))
		}
		if kind == msgDocument || kind == msgAudio {
			docs++
		}
		f, e := s.inputFileLocked(p, fmt.Sprintf("media%d", i), str("media"), fileKinds[kind])
		if e != nil {
			return nil, e
		}
		var ents string
		if raw, ok := item["caption_entities"]; ok {
			ents = string(raw)
		}
		text, ents2, e := formatText(str("caption"), str("parse_mode"), ents)
		if e != nil {
			return nil, e
		}
		if tghtml.Len(text) > MaxCaptionLength {
			return nil, badRequest("message caption is too long")
		}
		ms = append(ms, &storedMsg{kind: kind, file: f, text: text, sent: str("caption"), entities: ents2})
	}
	if docs > 0 && docs < len(ms) {
		return nil, badRequest("document and audio can't be mixed with other media types")
	}
	s.st.nextFile++
	group := fmt.Sprintf("1%016d", s.st.nextFile)
	for _, m := range ms {
		m.mediaGroup = group
	}
	if e := s.acceptLocked("sendMediaGroup", o, ms...); e != nil {
		return nil, e
	}
	out := make([]*apiMessage, len(ms))
	for i, m := range ms {
		out[i] = s.apiMessageOf(o.c, m)
	}
	return out, nil
}

func (s *Server) messageIn(c *chatState, p params, notFound string) (*storedMsg, *apiError) {
	id, ok, err := p.int64("message_id")
	if err != nil || !ok {
		return nil, badRequest("message_id is empty")
	}
	m, ok := c.msgs[id]
	if !ok {
		return nil, badRequest(notFound)
	}
	return m, nil
}

func (s *Server) copyLocked(method string, p params) (any, *apiError) {
	what, name := "copy", "copyMessage"
	if method == "forwardmessage" {
		what, name = "forward", "forwardMessage"
	}
	from, e := s.lookupChatLocked(p, "from_chat_id")
	if e != nil {
		return nil, e
	}
	src, e := s.messageIn(from, p, "message to "+what+" not found")
	if e != nil {
		return nil, e
	}
	o, e := s.outgoingLocked(p, method == "copymessage")
	if e != nil {
		return nil, e
	}
	m := &storedMsg{kind: src.kind, text: src.text, sent: src.sent, entities: src.entities, file: src.file, extra: src.extra}
	if method == "copymessage" {
		if p.has("caption") && src.hasMedia() {
			if m.text, m.entities, e = textParams(p, "caption", "parse_mode", "caption_entities", true); e != nil {
				return nil, e
			}
			m.sent = p.get("caption")
		}
	}
	if e := s.acceptLocked(name, o, m); e != nil {
		return nil, e
	}
	if method == "copymessage" {
		return struct {
			MessageID int64 `json:"message_id"`
		}{m.id}, nil
	}
	am := s.apiMessageOf(o.c, m)
	if src.fromBot {
		am.ForwardOrigin = &apiOrigin{Type: "user", Date: src.date, SenderUser: s.botUser(false)}
	} else {
		u := s.st.users[src.fromUser]
		am.ForwardOrigin = &apiOrigin{Type: "user", Date: src.date, SenderUser: &apiUser{ID: u.ID, FirstName: u.FirstName, Username: u.Username}}
	}
	return am, nil
}

// editTargetLocked finds the bot's message an edit method names.
func (s *Server) editTargetLocked(p params) (*chatState, *storedMsg, *apiError) {
	if p.get("inline_message_id") != "" {
		return nil, nil, badRequest("inline messages are not supported by telegramtest")
	}
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, nil, e
	}
	m, e := s.messageIn(c, p, "message to edit not found")
	if e != nil {
		return nil, nil, e
	}
	if !m.fromBot {
		return nil, nil, badRequest("message can't be edited")
	}
	return c, m, nil
}

// notModified is Telegram's refusal of an edit that changes nothing.
var notModified = badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")

// applyEditLocked stores an edit and records it in the ledger.
func (s *Server) applyEditLocked(method string, c *chatState, m *storedMsg, sent, text string, ents []Entity, raw, kept json.RawMessage) (any, *apiError) {
	if text == m.text && entitiesEqual(ents, m.entities) && string(kept) == string(m.markup) {
		return nil, notModified
	}
	if len(s.st.ledger) >= s.cfg.MaxMessages {
		return nil, &apiError{code: 500, desc: "Internal Server Error: telegramtest message ledger full (Config.MaxMessages)"}
	}
	m.sent, m.text, m.entities, m.markup = sent, text, ents, kept
	m.editDate = s.now().Unix()
	s.recordLocked(method, c, m, raw)
	return s.apiMessageOf(c, m), nil
}

func entitiesEqual(a, b []Entity) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *Server) editTextLocked(p params) (any, *apiError) {
	c, m, e := s.editTargetLocked(p)
	if e != nil {
		return nil, e
	}
	if m.kind != msgText {
		return nil, badRequest("there is no text in the message to edit")
	}
	text, ents, e := textParams(p, "text", "parse_mode", "entities", false)
	if e != nil {
		return nil, e
	}
	if e := checkLinkPreview(p); e != nil {
		return nil, e
	}
	raw, kept, e := checkMarkup(p)
	if e != nil {
		return nil, e
	}
	return s.applyEditLocked("editMessageText", c, m, p.get("text"), text, ents, raw, kept)
}

func (s *Server) editCaptionLocked(p params) (any, *apiError) {
	c, m, e := s.editTargetLocked(p)
	if e != nil {
		return nil, e
	}
	if !m.hasMedia() || m.kind == msgSticker {
		return nil, badRequest("there is no caption in the message to edit")
	}
	text, ents, e := textParams(p, "caption", "parse_mode", "caption_entities", true)
	if e != nil {
		return nil, e
	}
	raw, kept, e := checkMarkup(p)
	if e != nil {
		return nil, e
	}
	return s.applyEditLocked("editMessageCaption", c, m, p.get("caption"), text, ents, raw, kept)
}

func (s *Server) editMarkupLocked(p params) (any, *apiError) {
	c, m, e := s.editTargetLocked(p)
	if e != nil {
		return nil, e
	}
	raw, kept, e := checkMarkup(p)
	if e != nil {
		return nil, e
	}
	if raw != nil && kept == nil {
		return nil, badRequest("inline keyboard expected")
	}
	return s.applyEditLocked("editMessageReplyMarkup", c, m, m.sent, m.text, m.entities, raw, kept)
}

func (s *Server) deleteLocked(p params) (any, *apiError) {
	c, e := s.lookupChatLocked(p, "chat_id")
	if e != nil {
		return nil, e
	}
	m, e := s.messageIn(c, p, "message to delete not found")
	if e != nil {
		return nil, e
	}
	delete(c.msgs, m.id)
	s.st.stored--
	return true, nil
}

func (s *Server) deleteManyLocked(p params) (any, *apiError) {
	c, e := s.lookupChatLocked(p, "chat_id")
	if e != nil {
		return nil, e
	}
	var ids []int64
	if err := json.Unmarshal([]byte(p.get("message_ids")), &ids); err != nil {
		return nil, badRequest("can't parse message_ids JSON array")
	}
	if len(ids) < 1 || len(ids) > 100 {
		return nil, badRequest("message_ids must contain 1-100 identifiers")
	}
	for _, id := range ids {
		if _, ok := c.msgs[id]; ok {
			delete(c.msgs, id)
			s.st.stored--
		}
	}
	return true, nil
}

func (s *Server) answerCallbackLocked(p params) (any, *apiError) {
	id := p.get("callback_query_id")
	cb, ok := s.st.callbacks[id]
	if !ok || cb.answered {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	text := p.get("text")
	if tghtml.Len(text) > MaxCallbackAnswerLength {
		return nil, badRequest("MESSAGE_TOO_LONG")
	}
	if len(s.st.answers) >= s.cfg.MaxMessages {
		return nil, &apiError{code: 500, desc: "Internal Server Error: telegramtest callback answer ledger full (Config.MaxMessages)"}
	}
	cb.answered = true
	cb.answer = text
	s.st.callbacks[id] = cb
	s.st.answers = append(s.st.answers, CallbackAnswer{
		QueryID: id, ChatID: cb.chatID, MessageID: cb.messageID, Text: text,
		ShowAlert: p.bool("show_alert"), URL: p.get("url"), Time: s.now(),
	})
	s.pokeLocked()
	return true, nil
}
