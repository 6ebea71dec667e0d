package telegramtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Update is an update the server made from a simulated user's action, as a
// plain value.
type Update struct {
	// ID is the update_id; ids increase by one per update.
	ID int64
	// ChatID is the chat the update belongs to.
	ChatID int64
	// Kind is "message", "edited_message", "callback_query",
	// "inline_query" or "pre_checkout_query".
	Kind string
	// MessageID is the user's new message, or the message whose button was
	// pressed.
	MessageID int64
	// CallbackQueryID is the id answerCallbackQuery takes, for a button
	// press.
	CallbackQueryID string
	// InlineQueryID is the id answerInlineQuery takes, for an inline
	// query.
	InlineQueryID string
	// PreCheckoutQueryID is the id answerPreCheckoutQuery takes, for a
	// payment ([Server.Pay]).
	PreCheckoutQueryID string
	// Filtered is true when allowed_updates excludes Kind: the bot will
	// never see this update (and ID is 0).
	Filtered bool
	// JSON is the update as the bot receives it.
	JSON []byte
}

// pendingUpdate waits in the queue until getUpdates confirms it or the
// webhook accepts it.
type pendingUpdate struct {
	Update
	attempts  int
	notBefore time.Time
	inflight  bool
}

type callbackState struct {
	chatID, messageID int64
	answered          bool
	answer            string
}

// UserMessage is what a simulated user sends with [Server.Send]: a text,
// or a photo, a document or a location (Text is then the caption).
type UserMessage struct {
	// Text is the message text, or the caption of a photo or document.
	Text string
	// ReplyTo is the id of the message in the same chat this one replies
	// to; zero for none.
	ReplyTo int64
	// Photo, when set, sends a photo.
	Photo *UserFile
	// Document, when set, sends a document.
	Document *UserFile
	// Location, when set, sends a location.
	Location *Location
}

// UserFile is a file a simulated user sends. The bot can fetch it with
// getFile and the download path.
type UserFile struct {
	Name string
	Data []byte
}

// SendText makes from send text in chat c, as a user types it. It is
// Send with only a text.
func (s *Server) SendText(c Chat, from User, text string) (Update, error) {
	return s.Send(c, from, UserMessage{Text: text})
}

// SendChatter makes n messages arrive over chats new private chats, round
// robin ("message 0", "message 1", ...), each chat with a new user
// ("User0", "User1", ...), and returns their updates in order: traffic
// for a test that needs many updates over several chats.
func (s *Server) SendChatter(chats, n int) ([]Update, error) {
	if chats < 1 {
		return nil, fmt.Errorf("telegramtest: SendChatter over %d chats: want at least 1", chats)
	}
	type pair struct {
		u User
		c Chat
	}
	ps := make([]pair, chats)
	for i := range ps {
		u := s.NewUser(fmt.Sprintf("User%d", i))
		c, err := s.NewPrivateChat(u)
		if err != nil {
			return nil, err
		}
		ps[i] = pair{u, c}
	}
	ups := make([]Update, 0, n)
	for i := range n {
		p := ps[i%len(ps)]
		up, err := s.SendText(p.c, p.u, fmt.Sprintf("message %d", i))
		if err != nil {
			return ups, err
		}
		ups = append(ups, up)
	}
	return ups, nil
}

// Send makes from send m in chat c. Telegram's own entities (a bot
// command, a mention, a hashtag, a URL) are found in the text. from must
// be the private chat's user; in a group they join if needed. A user who
// blocked the bot unblocks it by writing, as in Telegram. It fails with
// ErrBadMessage when m carries no content or two kinds of it, and with
// ErrUnknownMessage when m.ReplyTo does not exist in c.
func (s *Server) Send(c Chat, from User, m UserMessage) (Update, error) {
	kinds := 0
	for _, set := range []bool{m.Photo != nil, m.Document != nil, m.Location != nil} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		return Update{}, fmt.Errorf("%w: more than one of Photo, Document and Location", ErrBadMessage)
	case kinds == 0 && strings.TrimSpace(m.Text) == "":
		return Update{}, fmt.Errorf("%w: empty text", ErrBadMessage)
	case m.Location != nil && m.Text != "":
		return Update{}, fmt.Errorf("%w: a location has no caption", ErrBadMessage)
	case m.Location != nil && (m.Location.Latitude < -90 || m.Location.Latitude > 90 || m.Location.Longitude < -180 || m.Location.Longitude > 180):
		return Update{}, fmt.Errorf("%w: location out of range", ErrBadMessage)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, us, err := s.actorLocked(c, from, false)
	if err != nil {
		return Update{}, err
	}
	if s.st.stored >= s.cfg.MaxMessages {
		return Update{}, ErrLedgerFull
	}
	if len(s.st.pending) >= s.cfg.MaxPendingUpdates {
		return Update{}, ErrQueueFull
	}
	if _, ok := cs.msgs[m.ReplyTo]; m.ReplyTo != 0 && !ok {
		return Update{}, ErrUnknownMessage
	}
	if cs.Type == ChatPrivate {
		us.blocked = false
	} else {
		cs.members[us.ID] = true
	}
	sm := &storedMsg{fromUser: us.ID, kind: msgText, text: m.Text, sent: m.Text, replyTo: m.ReplyTo}
	switch {
	case m.Photo != nil:
		sm.kind, sm.file = msgPhoto, s.newFileLocked("photos", m.Photo.Name, m.Photo.Data)
	case m.Document != nil:
		sm.kind, sm.file = msgDocument, s.newFileLocked("documents", m.Document.Name, m.Document.Data)
	case m.Location != nil:
		loc := *m.Location
		sm.kind, sm.extra = msgLocation, &loc
	}
	sm.entities = detectEntities(sm.text, nil)
	s.storeLocked(cs, sm)
	am := s.apiMessageOf(cs, sm)
	return s.enqueueLocked(Update{ChatID: cs.ID, Kind: "message", MessageID: sm.id}, func(id int64) any {
		return struct {
			UpdateID int64       `json:"update_id"`
			Message  *apiMessage `json:"message"`
		}{id, am}
	}), nil
}

// EditText makes from edit the text of their own message messageID in
// chat c: the bot receives an edited_message update. It fails with
// ErrUnknownMessage unless from sent that text message.
func (s *Server) EditText(c Chat, from User, messageID int64, text string) (Update, error) {
	if strings.TrimSpace(text) == "" {
		return Update{}, fmt.Errorf("%w: empty text", ErrBadMessage)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, us, err := s.actorLocked(c, from, false)
	if err != nil {
		return Update{}, err
	}
	sm, ok := cs.msgs[messageID]
	if !ok || sm.fromBot || sm.fromUser != us.ID || sm.kind != msgText {
		return Update{}, ErrUnknownMessage
	}
	if len(s.st.pending) >= s.cfg.MaxPendingUpdates {
		return Update{}, ErrQueueFull
	}
	sm.text, sm.sent, sm.entities, sm.editDate = text, text, detectEntities(text, nil), s.now().Unix()
	am := s.apiMessageOf(cs, sm)
	return s.enqueueLocked(Update{ChatID: cs.ID, Kind: "edited_message", MessageID: sm.id}, func(id int64) any {
		return struct {
			UpdateID      int64       `json:"update_id"`
			EditedMessage *apiMessage `json:"edited_message"`
		}{id, am}
	}), nil
}

// inlineState is an inline query waiting for, or given, its answer.
type inlineState struct {
	from     int64
	answered bool
}

// InlineQuery makes from type query in the inline mode of the bot (in
// their private chat with it): the bot receives an inline_query update,
// whose ChatID is the user's id. Its answer is in [Server.InlineAnswers].
func (s *Server) InlineQuery(from User, query string) (Update, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	us, ok := s.st.users[from.ID]
	if !ok {
		return Update{}, ErrUnknownUser
	}
	if us.deactivated {
		return Update{}, ErrDeactivated
	}
	if len(s.st.pending) >= s.cfg.MaxPendingUpdates || len(s.st.inline) >= s.cfg.MaxPendingUpdates {
		return Update{}, ErrQueueFull
	}
	qid := s.nextQueryIDLocked(7)
	type apiInlineQuery struct {
		ID       string   `json:"id"`
		From     *apiUser `json:"from"`
		Query    string   `json:"query"`
		Offset   string   `json:"offset"`
		ChatType string   `json:"chat_type"`
	}
	iq := apiInlineQuery{ID: qid, From: apiUserOf(us), Query: query, ChatType: "sender"}
	u := s.enqueueLocked(Update{ChatID: us.ID, Kind: "inline_query", InlineQueryID: qid}, func(id int64) any {
		return struct {
			UpdateID    int64          `json:"update_id"`
			InlineQuery apiInlineQuery `json:"inline_query"`
		}{id, iq}
	})
	if !u.Filtered {
		s.st.inline[qid] = &inlineState{from: us.ID}
		s.trackQueryLocked(QueryInline, qid, us.ID, us.ID)
	}
	return u, nil
}

// inlineResultTypes are the valid InlineQueryResult types.
var inlineResultTypes = strings.Fields("article photo gif mpeg4_gif video audio voice document location venue contact game sticker")

func (s *Server) answerInlineLocked(p params) (any, *apiError) {
	id := p.get("inline_query_id")
	st, ok := s.st.inline[id]
	if !ok || st.answered {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	var results []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	raw := p.get("results")
	if err := json.Unmarshal([]byte(raw), &results); err != nil {
		return nil, badRequest("can't parse results JSON array")
	}
	if len(results) > 50 {
		return nil, badRequest("RESULTS_TOO_MUCH")
	}
	seen := map[string]bool{}
	for _, r := range results {
		if !slices.Contains(inlineResultTypes, r.Type) {
			return nil, badRequest("RESULT_TYPE_INVALID")
		}
		if r.ID == "" || len(r.ID) > 64 {
			return nil, badRequest("RESULT_ID_INVALID")
		}
		if seen[r.ID] {
			return nil, badRequest("RESULT_ID_DUPLICATE")
		}
		seen[r.ID] = true
	}
	if len(s.st.inlineAnswers) >= s.cfg.MaxMessages {
		return nil, &apiError{code: 500, desc: "Internal Server Error: telegramtest inline answer ledger full (Config.MaxMessages)"}
	}
	cache, _, _ := p.int64("cache_time")
	st.answered = true
	s.st.inlineAnswers = append(s.st.inlineAnswers, InlineAnswer{
		QueryID: id, UserID: st.from, Results: json.RawMessage(raw), Count: len(results),
		CacheTime: int(cache), IsPersonal: p.bool("is_personal"), NextOffset: p.get("next_offset"), Time: s.now(),
	})
	s.pokeLocked()
	return true, nil
}

// SendCommand makes from send "/command args" (args may be empty); in
// groups the command is addressed to the bot ("/command@bot_username").
func (s *Server) SendCommand(c Chat, from User, command, args string) (Update, error) {
	text := "/" + strings.TrimPrefix(command, "/")
	if c.Type == ChatGroup || c.Type == ChatSupergroup {
		s.mu.Lock()
		text += "@" + s.cfg.BotUsername
		s.mu.Unlock()
	}
	if args != "" {
		text += " " + args
	}
	return s.SendText(c, from, text)
}

// PressButton makes from press the inline button with callback_data data
// on message messageID, which the bot sent in chat c (channels included). It fails with
// ErrUnknownMessage unless that message exists, is the bot's, and has
// such a button.
func (s *Server) PressButton(c Chat, from User, messageID int64, data string) (Update, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, us, err := s.actorLocked(c, from, true)
	if err != nil {
		return Update{}, err
	}
	m, ok := cs.msgs[messageID]
	if !ok || !m.fromBot || !hasButton(m.markup, data) {
		return Update{}, ErrUnknownMessage
	}
	if len(s.st.pending) >= s.cfg.MaxPendingUpdates || len(s.st.callbacks) >= s.cfg.MaxPendingUpdates {
		return Update{}, ErrQueueFull
	}
	qid := s.nextQueryIDLocked(0)
	type apiCallback struct {
		ID           string      `json:"id"`
		From         apiUser     `json:"from"`
		Message      *apiMessage `json:"message"`
		ChatInstance string      `json:"chat_instance"`
		Data         string      `json:"data"`
	}
	cb := apiCallback{
		ID:           qid,
		From:         apiUser{ID: us.ID, FirstName: us.FirstName, LastName: us.LastName, Username: us.Username, LanguageCode: us.LanguageCode},
		Message:      s.apiMessageOf(cs, m),
		ChatInstance: fmt.Sprint(-cs.ID*7 + 3),
		Data:         data,
	}
	u := s.enqueueLocked(Update{ChatID: cs.ID, Kind: "callback_query", MessageID: m.id, CallbackQueryID: qid}, func(id int64) any {
		return struct {
			UpdateID      int64       `json:"update_id"`
			CallbackQuery apiCallback `json:"callback_query"`
		}{id, cb}
	})
	if !u.Filtered {
		s.st.callbacks[qid] = callbackState{chatID: cs.ID, messageID: m.id}
		s.trackQueryLocked(QueryCallback, qid, cs.ID, us.ID)
	}
	return u, nil
}

// CallbackAnswer returns the text answerCallbackQuery gave for query id,
// and whether it was answered.
func (s *Server) CallbackAnswer(id string) (text string, answered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cb := s.st.callbacks[id]
	return cb.answer, cb.answered
}

func hasButton(markup json.RawMessage, data string) bool {
	var kb struct {
		InlineKeyboard [][]struct {
			CallbackData *string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if len(markup) == 0 || json.Unmarshal(markup, &kb) != nil {
		return false
	}
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			if b.CallbackData != nil && *b.CallbackData == data {
				return true
			}
		}
	}
	return false
}

// actorLocked checks that from may act in c; pressing a button is allowed
// in channels too, writing is not.
func (s *Server) actorLocked(c Chat, from User, pressing bool) (*chatState, *userState, error) {
	cs, ok := s.st.chats[c.ID]
	if !ok {
		return nil, nil, ErrUnknownChat
	}
	us, ok := s.st.users[from.ID]
	if !ok {
		return nil, nil, ErrUnknownUser
	}
	switch {
	case cs.migratedTo != 0:
		return nil, nil, ErrChatMigrated
	case cs.Type == ChatChannel && !pressing:
		return nil, nil, ErrChannel
	case cs.Type == ChatPrivate && cs.UserID != us.ID:
		return nil, nil, fmt.Errorf("%w: user %d is not in private chat %d", ErrUnknownUser, us.ID, cs.ID)
	case us.deactivated:
		return nil, nil, ErrDeactivated
	}
	return cs, us, nil
}

// enqueueLocked gives u the next update_id, unless allowed_updates filters
// it out, and queues it for the bot.
func (s *Server) enqueueLocked(u Update, body func(id int64) any) Update {
	if len(s.st.webhook.allowed) > 0 && !slices.Contains(s.st.webhook.allowed, u.Kind) {
		u.Filtered = true
		return u
	}
	u.ID = s.st.nextUpdateID
	s.st.nextUpdateID++
	u.JSON, _ = json.Marshal(body(u.ID)) // plain structs: cannot fail
	s.st.pending = append(s.st.pending, &pendingUpdate{Update: u})
	s.st.pendingChats[u.ChatID]++
	s.wakeLocked()
	return u
}

// PendingUpdates returns how many updates wait for the bot.
func (s *Server) PendingUpdates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.st.pending)
}

// WaitIdle waits until no update waits for the bot: every update was
// accepted by the webhook, confirmed through getUpdates, given up or
// dropped. It returns ctx's error when ctx ends first, and an error when
// the server is closed.
func (s *Server) WaitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch := len(s.st.pending), s.changed
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("telegramtest: waiting for %d pending update(s): %w", n, ctx.Err())
		case <-s.ctx.Done():
			return errClosed
		}
	}
}

// removePendingLocked drops u from the queue if it is still there.
func (s *Server) removePendingLocked(u *pendingUpdate) {
	if i := slices.Index(s.st.pending, u); i >= 0 {
		s.st.pending = slices.Delete(s.st.pending, i, i+1)
		if s.st.pendingChats[u.ChatID]--; s.st.pendingChats[u.ChatID] <= 0 {
			delete(s.st.pendingChats, u.ChatID)
		}
	}
}

// setPendingLocked replaces the queue and recounts its chats.
func (s *Server) setPendingLocked(p []*pendingUpdate) {
	s.st.pending = p
	clear(s.st.pendingChats)
	for _, u := range p {
		s.st.pendingChats[u.ChatID]++
	}
}

func (s *Server) getUpdates(ctx context.Context, p params) (any, *apiError) {
	offset, _, err := p.int64("offset")
	if err != nil {
		return nil, badRequest("offset is invalid")
	}
	limit, ok, err := p.int64("limit")
	if err != nil {
		return nil, badRequest("limit is invalid")
	}
	if !ok || limit > 100 {
		limit = 100
	}
	limit = max(limit, 1)
	secs, _, err := p.int64("timeout")
	if err != nil {
		return nil, badRequest("timeout is invalid")
	}
	timeout := min(time.Duration(max(secs, 0))*time.Second, s.cfg.MaxPollTimeout)
	var allowed []string
	if raw := p.get("allowed_updates"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &allowed); err != nil {
			return nil, badRequest("can't parse allowed_updates JSON array")
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.webhook.url != "" {
		return nil, &apiError{code: 409, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
	}
	if p.has("allowed_updates") {
		s.st.webhook.allowed = allowed
	}
	s.st.pollGen++
	gen := s.st.pollGen
	epoch := s.st.epoch
	// Confirm: updates below offset are forgotten; a negative offset keeps
	// only the last -offset updates.
	switch {
	case offset > 0:
		s.setPendingLocked(slices.DeleteFunc(s.st.pending, func(u *pendingUpdate) bool { return u.ID < offset }))
	case offset < 0:
		if keep := int(min(-offset, int64(len(s.st.pending)))); keep < len(s.st.pending) {
			s.setPendingLocked(slices.Delete(s.st.pending, 0, len(s.st.pending)-keep))
		}
		offset = 0
	}
	s.wakeLocked() // ends an older long poll with 409, as Telegram does, and wakes WaitIdle
	deadline := time.Now().Add(timeout)
	for {
		var out []json.RawMessage
		for _, u := range s.st.pending {
			if len(out) >= int(limit) {
				break
			}
			if u.ID >= offset {
				u.attempts++
				out = append(out, u.JSON)
				s.recordDeliveryLocked(Delivery{UpdateID: u.ID, ChatID: u.ChatID, Via: "getUpdates", Attempt: u.attempts, Status: 200, Reached: true, Start: s.now()})
			}
		}
		wait := time.Until(deadline)
		if len(out) > 0 || wait <= 0 {
			if out == nil {
				out = []json.RawMessage{}
			}
			return out, nil
		}
		ch := s.changed
		s.st.polling++
		s.mu.Unlock()
		t := time.NewTimer(wait)
		var closed bool
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			closed = true
		case <-s.ctx.Done():
			closed = true
		}
		t.Stop()
		s.mu.Lock()
		s.st.polling--
		if closed {
			return []json.RawMessage{}, nil
		}
		if s.st.epoch != epoch {
			return []json.RawMessage{}, nil
		}
		if s.st.pollGen != gen {
			return nil, &apiError{code: 409, desc: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
		}
		if s.st.webhook.url != "" {
			return nil, &apiError{code: 409, desc: "Conflict: terminated by setWebhook request"}
		}
	}
}

// nextQueryIDLocked is a fresh id of a callback, inline or pre-checkout
// query: a prefix from the bot's id plus kind (so the kinds' ids differ),
// then the server's query counter.
func (s *Server) nextQueryIDLocked(kind int64) string {
	s.st.nextCallback++
	return fmt.Sprintf("%d%010d", s.botID%100000+kind, s.st.nextCallback)
}
