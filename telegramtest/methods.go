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
}

type apiChat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
}

type apiEntity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
}

type apiPhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
}

type apiDocument struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
}

type apiOrigin struct {
	Type       string   `json:"type"`
	Date       int64    `json:"date"`
	SenderUser *apiUser `json:"sender_user,omitempty"`
	Chat       *apiChat `json:"chat,omitempty"`
}

type apiMessage struct {
	MessageID       int64           `json:"message_id"`
	MessageThreadID int64           `json:"message_thread_id,omitempty"`
	From            *apiUser        `json:"from,omitempty"`
	SenderChat      *apiChat        `json:"sender_chat,omitempty"`
	Chat            apiChat         `json:"chat"`
	Date            int64           `json:"date"`
	EditDate        int64           `json:"edit_date,omitempty"`
	ForwardOrigin   *apiOrigin      `json:"forward_origin,omitempty"`
	Text            string          `json:"text,omitempty"`
	Entities        []apiEntity     `json:"entities,omitempty"`
	Caption         string          `json:"caption,omitempty"`
	Photo           []apiPhotoSize  `json:"photo,omitempty"`
	Document        *apiDocument    `json:"document,omitempty"`
	ReplyMarkup     json.RawMessage `json:"reply_markup,omitempty"`
}

// knownMethod reports whether the server implements method; Telegram's
// method names are case-insensitive.
func knownMethod(method string) bool {
	switch strings.ToLower(method) {
	case "getme", "sendmessage", "copymessage", "forwardmessage", "editmessagetext",
		"deletemessage", "answercallbackquery", "sendphoto", "senddocument",
		"setwebhook", "deletewebhook", "getwebhookinfo", "getupdates":
		return true
	}
	return false
}

// call runs one Bot API method.
func (s *Server) call(ctx context.Context, method string, p params) (any, *apiError) {
	m := strings.ToLower(method)
	if m == "getupdates" {
		return s.getUpdates(ctx, p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m {
	case "getme":
		return s.botUser(true), nil
	case "sendmessage":
		return s.sendMessageLocked(p)
	case "sendphoto", "senddocument":
		return s.sendFileLocked(m, p)
	case "copymessage", "forwardmessage":
		return s.copyLocked(m, p)
	case "editmessagetext":
		return s.editLocked(p)
	case "deletemessage":
		return s.deleteLocked(p)
	case "answercallbackquery":
		return s.answerCallbackLocked(p)
	case "setwebhook":
		return s.setWebhookLocked(p)
	case "deletewebhook":
		return s.deleteWebhookLocked(p)
	case "getwebhookinfo":
		return s.webhookInfoLocked(), nil
	}
	return nil, &apiError{code: 404, desc: "Not Found"}
}

func (s *Server) botUser(full bool) *apiUser {
	u := &apiUser{ID: s.botID, IsBot: true, FirstName: s.cfg.BotName, Username: s.cfg.BotUsername}
	if full {
		t, f := true, false
		u.CanJoinGroups, u.CanReadAllGroupMessages, u.SupportsInlineQueries = &t, &f, &f
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

func (s *Server) apiMessageOf(c *chatState, m *storedMsg) *apiMessage {
	am := &apiMessage{
		MessageID: m.id, MessageThreadID: m.threadID, Chat: s.apiChatOf(c),
		Date: m.date, EditDate: m.editDate, ReplyMarkup: m.markup,
	}
	switch {
	case m.fromBot && c.Type == ChatChannel:
		sc := s.apiChatOf(c)
		am.SenderChat = &sc
	case m.fromBot:
		am.From = s.botUser(false)
	default:
		u := s.st.users[m.fromUser]
		am.From = &apiUser{ID: u.ID, FirstName: u.FirstName, LastName: u.LastName, Username: u.Username, LanguageCode: u.LanguageCode}
	}
	switch {
	case m.photo:
		fid := fmt.Sprintf("AgAD%d_%d", -c.ID, m.id)
		am.Photo = []apiPhotoSize{{FileID: fid, FileUniqueID: fid, Width: 90, Height: 90}, {FileID: fid + "x", FileUniqueID: fid + "x", Width: 800, Height: 800}}
		am.Caption = m.text
	case m.document != "":
		fid := fmt.Sprintf("BQAD%d_%d", -c.ID, m.id)
		am.Document = &apiDocument{FileID: fid, FileUniqueID: fid, FileName: m.document}
		am.Caption = m.text
	default:
		am.Text, am.Entities = m.text, m.entities
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

// checkText validates a text or caption under its parse_mode and returns
// the text a reader sees. caption selects the caption rules.
func checkText(text, parseMode string, caption bool) (string, *apiError) {
	visible := text
	switch strings.ToLower(parseMode) {
	case "":
	case "html":
		if p := tghtml.Check(text); p != nil {
			return "", badRequest("can't parse entities: " + describeProblem(p))
		}
		visible = tghtml.Text(text)
	case "markdown", "markdownv2":
		// Accepted as is: the fake checks only HTML.
	default:
		return "", badRequest("unsupported parse_mode")
	}
	if caption {
		if tghtml.Len(visible) > MaxCaptionLength {
			return "", badRequest("message caption is too long")
		}
		return visible, nil
	}
	if strings.TrimSpace(visible) == "" {
		return "", badRequest("message text is empty")
	}
	if tghtml.Len(visible) > MaxTextLength {
		return "", badRequest("message is too long")
	}
	return visible, nil
}

// checkMarkup validates reply_markup: a JSON object.
func checkMarkup(p params) (json.RawMessage, *apiError) {
	raw := strings.TrimSpace(p.get("reply_markup"))
	if raw == "" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	return json.RawMessage(raw), nil
}

// acceptLocked is the common end of every sending method: rate limits,
// ledger capacity, then the effect.
func (s *Server) acceptLocked(method string, c *chatState, m *storedMsg) *apiError {
	if len(s.st.ledger) >= s.cfg.MaxMessages || s.st.stored >= s.cfg.MaxMessages {
		return &apiError{code: 500, desc: "Internal Server Error: telegramtest message ledger full (Config.MaxMessages)"}
	}
	if e := s.rateCheckLocked(c); e != nil {
		return e
	}
	s.storeLocked(c, m)
	s.recordLocked(method, c, m)
	return nil
}

func (s *Server) storeLocked(c *chatState, m *storedMsg) {
	c.nextMsgID++
	m.id = c.nextMsgID
	m.date = s.now().Unix()
	c.msgs[m.id] = m
	s.st.stored++
}

func (s *Server) recordLocked(method string, c *chatState, m *storedMsg) {
	s.st.ledger = append(s.st.ledger, Message{
		ChatID: c.ID, MessageID: m.id, ThreadID: m.threadID, Method: method,
		Text: m.text, Time: s.now(),
	})
}

func (s *Server) threadID(p params) (int64, *apiError) {
	n, _, err := p.int64("message_thread_id")
	if err != nil {
		return 0, badRequest("message_thread_id is invalid")
	}
	return n, nil
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
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	text := p.get("text")
	if _, e := checkText(text, p.get("parse_mode"), false); e != nil {
		return nil, e
	}
	markup, e := checkMarkup(p)
	if e != nil {
		return nil, e
	}
	thread, e := s.threadID(p)
	if e != nil {
		return nil, e
	}
	m := &storedMsg{fromBot: true, text: text, markup: markup, threadID: thread}
	if e := s.acceptLocked("sendMessage", c, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(c, m), nil
}

func (s *Server) sendFileLocked(method string, p params) (any, *apiError) {
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	field, name := "photo", "sendPhoto"
	if method == "senddocument" {
		field, name = "document", "sendDocument"
	}
	fileName := ""
	if f, ok := p.files[field]; ok {
		fileName = f.Name
	} else if v := p.get(field); v != "" {
		if ref, ok := strings.CutPrefix(v, "attach://"); ok {
			f, ok := p.files[ref]
			if !ok {
				return nil, badRequest("there is no " + field + " in the request")
			}
			fileName = f.Name
		} else {
			fileName = v[strings.LastIndexByte(v, '/')+1:]
		}
	} else {
		return nil, badRequest("there is no " + field + " in the request")
	}
	caption := p.get("caption")
	if _, e := checkText(caption, p.get("parse_mode"), true); e != nil {
		return nil, e
	}
	markup, e := checkMarkup(p)
	if e != nil {
		return nil, e
	}
	thread, e := s.threadID(p)
	if e != nil {
		return nil, e
	}
	m := &storedMsg{fromBot: true, text: caption, markup: markup, threadID: thread}
	if field == "photo" {
		m.photo = true
	} else {
		if fileName == "" {
			fileName = "file"
		}
		m.document = fileName
	}
	if e := s.acceptLocked(name, c, m); e != nil {
		return nil, e
	}
	return s.apiMessageOf(c, m), nil
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
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	thread, e := s.threadID(p)
	if e != nil {
		return nil, e
	}
	m := &storedMsg{fromBot: true, text: src.text, entities: src.entities, photo: src.photo, document: src.document, threadID: thread}
	if method == "copymessage" {
		if p.has("caption") && (src.photo || src.document != "") {
			if _, e := checkText(p.get("caption"), p.get("parse_mode"), true); e != nil {
				return nil, e
			}
			m.text, m.entities = p.get("caption"), nil
		}
		markup, e := checkMarkup(p)
		if e != nil {
			return nil, e
		}
		m.markup = markup
	}
	if e := s.acceptLocked(name, c, m); e != nil {
		return nil, e
	}
	if method == "copymessage" {
		return struct {
			MessageID int64 `json:"message_id"`
		}{m.id}, nil
	}
	am := s.apiMessageOf(c, m)
	if src.fromBot {
		am.ForwardOrigin = &apiOrigin{Type: "user", Date: src.date, SenderUser: s.botUser(false)}
	} else {
		u := s.st.users[src.fromUser]
		am.ForwardOrigin = &apiOrigin{Type: "user", Date: src.date, SenderUser: &apiUser{ID: u.ID, FirstName: u.FirstName, Username: u.Username}}
	}
	return am, nil
}

func (s *Server) editLocked(p params) (any, *apiError) {
	if p.get("inline_message_id") != "" {
		return nil, badRequest("inline messages are not supported by telegramtest")
	}
	c, e := s.targetChatLocked(p)
	if e != nil {
		return nil, e
	}
	m, e := s.messageIn(c, p, "message to edit not found")
	if e != nil {
		return nil, e
	}
	if !m.fromBot {
		return nil, badRequest("message can't be edited")
	}
	if m.photo || m.document != "" {
		return nil, badRequest("there is no text in the message to edit")
	}
	text := p.get("text")
	if _, e := checkText(text, p.get("parse_mode"), false); e != nil {
		return nil, e
	}
	markup, e := checkMarkup(p)
	if e != nil {
		return nil, e
	}
	if text == m.text && string(markup) == string(m.markup) {
		return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	if len(s.st.ledger) >= s.cfg.MaxMessages {
		return nil, &apiError{code: 500, desc: "Internal Server Error: telegramtest message ledger full (Config.MaxMessages)"}
	}
	m.text, m.markup, m.entities = text, markup, nil
	m.editDate = s.now().Unix()
	s.recordLocked("editMessageText", c, m)
	return s.apiMessageOf(c, m), nil
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

func (s *Server) answerCallbackLocked(p params) (any, *apiError) {
	id := p.get("callback_query_id")
	cb, ok := s.st.callbacks[id]
	if !ok || cb.answered {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	if tghtml.Len(p.get("text")) > MaxCallbackAnswerLength {
		return nil, badRequest("MESSAGE_TOO_LONG")
	}
	cb.answered = true
	cb.answer = p.get("text")
	s.st.callbacks[id] = cb
	return true, nil
}
