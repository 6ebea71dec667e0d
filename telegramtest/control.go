package telegramtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// ControlPrefix is the path prefix of the JSON control API, served when
// Config.ControlAPI is true. See the package doc for its endpoints.
const ControlPrefix = "/_sandbox/"

// MaxControlBodyBytes bounds a control API request body.
const MaxControlBodyBytes = 1 << 20

type controlUpdate struct {
	UpdateID        int64  `json:"update_id"`
	ChatID          int64  `json:"chat_id"`
	Kind            string `json:"kind"`
	MessageID       int64  `json:"message_id,omitempty"`
	CallbackQueryID string `json:"callback_query_id,omitempty"`
	InlineQueryID   string `json:"inline_query_id,omitempty"`
	PreCheckoutID   string `json:"pre_checkout_query_id,omitempty"`
	Filtered        bool   `json:"filtered,omitempty"`
}

func controlUpdateOf(u Update) controlUpdate {
	return controlUpdate{u.ID, u.ChatID, u.Kind, u.MessageID, u.CallbackQueryID, u.InlineQueryID, u.PreCheckoutQueryID, u.Filtered}
}

// controlFile is a file in a control request; Data is base64 in JSON.
type controlFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// MaxControlWait bounds the timeout of the control API's waits.
const MaxControlWait = 5 * time.Minute

type controlLimit struct {
	Count int   `json:"count"`
	PerMS int64 `json:"per_ms"`
}

type controlFault struct {
	Method     string    `json:"method"`
	Kind       FaultKind `json:"kind"`
	Nth        int       `json:"nth"`
	Times      int       `json:"times"`
	DelayMS    int64     `json:"delay_ms"`
	JitterMS   int64     `json:"jitter_ms"`
	Status     int       `json:"status"`
	RetryAfter int       `json:"retry_after"`
	StallMS    int64     `json:"stall_ms"`
	Size       int       `json:"size"`
	DurationMS int64     `json:"duration_ms"`
}

type controlReq struct {
	Type      ChatType     `json:"type"`
	Title     string       `json:"title"`
	FirstName string       `json:"first_name"`
	UserID    int64        `json:"user_id"`
	MemberIDs []int64      `json:"member_ids"`
	ChatID    int64        `json:"chat_id"`
	MessageID int64        `json:"message_id"`
	Text      string       `json:"text"`
	Command   string       `json:"command"`
	Args      string       `json:"args"`
	Data      string       `json:"data"`
	ReplyTo   int64        `json:"reply_to"`
	Photo     *controlFile `json:"photo"`
	Document  *controlFile `json:"document"`
	Location  *Location    `json:"location"`
	Query     string       `json:"query"`
	Count     int          `json:"count"`
	TimeoutMS int64        `json:"timeout_ms"`
	Blocked   *bool        `json:"blocked"`
	Disabled  bool         `json:"disabled"`
	Bot       controlLimit `json:"bot"`
	Chat      controlLimit `json:"chat"`
	Group     controlLimit `json:"group"`
	controlFault
}

// controlError is a control API failure: its status and message.
type controlError struct {
	code int
	msg  string
}

func (e *controlError) Error() string { return e.msg }

func cerr(code int, format string, args ...any) error {
	return &controlError{code, fmt.Sprintf(format, args...)}
}

func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	var req controlReq
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxControlBodyBytes+1))
		if err != nil {
			return
		}
		if len(body) > MaxControlBodyBytes {
			writeJSON(w, 413, map[string]string{"error": fmt.Sprintf("body over %d bytes", MaxControlBodyBytes)})
			return
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				writeJSON(w, 400, map[string]string{"error": "invalid JSON: " + err.Error()})
				return
			}
		}
	}
	res, err := s.control(r, req)
	if err != nil {
		code := 400
		if ce, ok := errors.AsType[*controlError](err); ok {
			code = ce.code
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, 200, res)
}

func (s *Server) control(r *http.Request, req controlReq) (any, error) {
	route := r.Method + " " + r.URL.Path[len(ControlPrefix)-1:]
	if route == "POST /users" || route == "POST /chats" || route == "POST /chats/upgrade" {
		s.mu.Lock()
		n := len(s.st.users) + len(s.st.chats)
		s.mu.Unlock()
		if n >= s.cfg.MaxControlObjects {
			return nil, cerr(409, "%d users and chats exist, the limit (Config.MaxControlObjects); POST /_sandbox/reset to start over", n)
		}
	}
	switch route {
	case "GET /":
		return map[string]any{"url": s.URL, "token": s.Token, "bot": s.botUser(false)}, nil
	case "POST /users":
		if req.FirstName == "" {
			return nil, cerr(400, "first_name is required")
		}
		return s.NewUser(req.FirstName), nil
	case "POST /users/block":
		u, err := s.userByID(req.UserID)
		if err != nil {
			return nil, err
		}
		blocked := req.Blocked == nil || *req.Blocked
		return true, s.SetBlocked(u, blocked)
	case "POST /users/deactivate":
		u, err := s.userByID(req.UserID)
		if err != nil {
			return nil, err
		}
		return true, s.Deactivate(u)
	case "GET /chats":
		return s.Chats(), nil
	case "POST /chats":
		return s.controlNewChat(req)
	case "POST /chats/upgrade":
		c, err := s.chatByID(req.ChatID)
		if err != nil {
			return nil, err
		}
		return s.UpgradeGroup(c)
	case "POST /chats/kick":
		c, err := s.chatByID(req.ChatID)
		if err != nil {
			return nil, err
		}
		return true, s.KickBot(c)
	case "POST /send", "POST /command", "POST /press", "POST /edit", "POST /pay":
		c, err := s.chatByID(req.ChatID)
		if err != nil {
			return nil, err
		}
		u, err := s.userByID(req.UserID)
		if err != nil {
			return nil, err
		}
		var upd Update
		switch route {
		case "POST /send":
			m := UserMessage{Text: req.Text, ReplyTo: req.ReplyTo, Location: req.Location}
			if req.Photo != nil {
				m.Photo = &UserFile{Name: req.Photo.Name, Data: req.Photo.Data}
			}
			if req.Document != nil {
				m.Document = &UserFile{Name: req.Document.Name, Data: req.Document.Data}
			}
			upd, err = s.Send(c, u, m)
		case "POST /edit":
			upd, err = s.EditText(c, u, req.MessageID, req.Text)
		case "POST /command":
			upd, err = s.SendCommand(c, u, req.Command, req.Args)
		case "POST /pay":
			upd, err = s.Pay(c, u, req.MessageID)
		default:
			upd, err = s.PressButton(c, u, req.MessageID, req.Data)
		}
		if err != nil {
			return nil, err
		}
		return controlUpdateOf(upd), nil
	case "POST /inline":
		u, err := s.userByID(req.UserID)
		if err != nil {
			return nil, err
		}
		upd, err := s.InlineQuery(u, req.Query)
		if err != nil {
			return nil, err
		}
		return controlUpdateOf(upd), nil
	case "GET /callback-answers":
		return orEmpty(s.CallbackAnswers()), nil
	case "GET /inline-answers":
		return orEmpty(s.InlineAnswers()), nil
	case "GET /queries":
		return s.QueryOutcomes(), nil
	case "GET /payments":
		return s.Payments(), nil
	case "POST /wait/messages", "POST /wait/settled":
		if req.TimeoutMS <= 0 || ms(req.TimeoutMS) > MaxControlWait {
			return nil, cerr(400, "timeout_ms must be in 1..%d", MaxControlWait.Milliseconds())
		}
		ctx, cancel := context.WithTimeout(r.Context(), ms(req.TimeoutMS))
		defer cancel()
		if route == "POST /wait/settled" {
			if err := s.WaitSettled(ctx); err != nil {
				return nil, cerr(408, "%v", err)
			}
			return true, nil
		}
		if req.Count < 1 {
			return nil, cerr(400, "count must be at least 1")
		}
		msgs, err := s.WaitMessages(ctx, req.ChatID, req.Count)
		if err != nil {
			return nil, cerr(408, "%v", err)
		}
		return msgs, nil
	case "GET /messages":
		if q := r.URL.Query().Get("chat_id"); q != "" {
			id, err := strconv.ParseInt(q, 10, 64)
			if err != nil {
				return nil, cerr(400, "chat_id is not an integer")
			}
			return orEmpty(s.MessagesTo(id)), nil
		}
		return orEmpty(s.Messages()), nil
	case "GET /deliveries":
		return orEmpty(s.Deliveries()), nil
	case "GET /repeats":
		return orEmpty(s.Repeats()), nil
	case "GET /duplicate-deliveries":
		return orEmpty(s.DuplicateDeliveries()), nil
	case "GET /calls":
		return s.Calls(), nil
	case "POST /faults":
		f := req.controlFault
		return true, s.Arm(Fault{
			Method: f.Method, Kind: f.Kind, Nth: f.Nth, Times: f.Times,
			Delay: ms(f.DelayMS), Jitter: ms(f.JitterMS), Status: f.Status,
			RetryAfter: f.RetryAfter, Stall: ms(f.StallMS), Size: f.Size,
			Duration: ms(f.DurationMS),
		})
	case "DELETE /faults":
		s.Disarm()
		return true, nil
	case "POST /limits":
		return true, s.SetLimits(Limits{
			Disabled: req.Disabled,
			Bot:      Limit{req.Bot.Count, ms(req.Bot.PerMS)},
			Chat:     Limit{req.Chat.Count, ms(req.Chat.PerMS)},
			Group:    Limit{req.Group.Count, ms(req.Group.PerMS)},
		})
	case "POST /reset":
		s.Reset()
		return true, nil
	}
	return nil, cerr(404, "no control endpoint %s; see the telegramtest package doc", route)
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func orEmpty[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

func (s *Server) controlNewChat(req controlReq) (any, error) {
	if req.Type == ChatPrivate {
		u, err := s.userByID(req.UserID)
		if err != nil {
			return nil, err
		}
		return s.NewPrivateChat(u)
	}
	var members []User
	for _, id := range req.MemberIDs {
		u, err := s.userByID(id)
		if err != nil {
			return nil, err
		}
		members = append(members, u)
	}
	switch req.Type {
	case ChatGroup:
		return s.NewGroup(req.Title, members...)
	case ChatSupergroup:
		return s.NewSupergroup(req.Title, members...)
	case ChatChannel:
		return s.NewChannel(req.Title)
	}
	return nil, cerr(400, "type must be private, group, supergroup or channel")
}

func (s *Server) userByID(id int64) (User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.st.users[id]
	if !ok {
		return User{}, cerr(404, "%v %d", ErrUnknownUser, id)
	}
	return u.User, nil
}

func (s *Server) chatByID(id int64) (Chat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.st.chats[id]
	if !ok {
		return Chat{}, cerr(404, "%v %d", ErrUnknownChat, id)
	}
	return c.Chat, nil
}
