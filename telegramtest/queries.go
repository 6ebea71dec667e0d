package telegramtest

import "time"

// Telegram's deadlines for the answers of queries: the defaults of
// [Deadlines].
const (
	// DefaultCallbackDeadline is how long a button's spinner waits for
	// answerCallbackQuery (about 15 s on Telegram's clients).
	DefaultCallbackDeadline = 15 * time.Second
	// DefaultInlineDeadline is how long an inline query waits for
	// answerInlineQuery.
	DefaultInlineDeadline = 10 * time.Second
	// DefaultPreCheckoutDeadline is how long a payment waits for
	// answerPreCheckoutQuery: the Bot API's documented 10 seconds. A
	// payment whose query was not answered ok in time fails.
	DefaultPreCheckoutDeadline = 10 * time.Second
)

// tooOld is Telegram's refusal of an answer to a query that is past its
// deadline, unknown, or answered already.
const tooOld = "query is too old and response timeout expired or query ID is invalid"

// Deadlines are how long the server waits for the answer of each kind of
// query, measured on Config.NowFunc from the moment the simulated user
// acted. An answer after the deadline is refused with Telegram's 400
// "Bad Request: query is too old and response timeout expired or query ID
// is invalid", and so is a second answer to a query. Zero means Telegram's
// default; a negative value means no deadline.
type Deadlines struct {
	// CallbackQuery bounds answerCallbackQuery. Defaults to
	// DefaultCallbackDeadline.
	CallbackQuery time.Duration `json:"callback_query"`
	// InlineQuery bounds answerInlineQuery. Defaults to
	// DefaultInlineDeadline.
	InlineQuery time.Duration `json:"inline_query"`
	// PreCheckoutQuery bounds answerPreCheckoutQuery. Defaults to
	// DefaultPreCheckoutDeadline.
	PreCheckoutQuery time.Duration `json:"pre_checkout_query"`
}

func (d Deadlines) withDefaults() Deadlines {
	if d.CallbackQuery == 0 {
		d.CallbackQuery = DefaultCallbackDeadline
	}
	if d.InlineQuery == 0 {
		d.InlineQuery = DefaultInlineDeadline
	}
	if d.PreCheckoutQuery == 0 {
		d.PreCheckoutQuery = DefaultPreCheckoutDeadline
	}
	return d
}

// of returns the deadline of kind, 0 for none.
func (d Deadlines) of(kind string) time.Duration {
	var v time.Duration
	switch kind {
	case QueryCallback:
		v = d.CallbackQuery
	case QueryInline:
		v = d.InlineQuery
	case QueryPreCheckout:
		v = d.PreCheckoutQuery
	}
	return max(v, 0)
}

// Kinds of queries, as [QueryOutcome.Kind] names them: the update fields
// that carry them.
const (
	QueryCallback    = "callback_query"
	QueryInline      = "inline_query"
	QueryPreCheckout = "pre_checkout_query"
)

// QueryState is where a query stands: [QueryWaiting], [QueryAnswered] or
// [QueryExpired].
type QueryState string

// The states of a query.
const (
	// QueryWaiting: not answered, and its deadline (if any) not passed.
	QueryWaiting QueryState = "waiting"
	// QueryAnswered: answered in time, once.
	QueryAnswered QueryState = "answered"
	// QueryExpired: its deadline passed unanswered. Every later answer is
	// refused, and a pre-checkout query's payment has failed.
	QueryExpired QueryState = "expired"
)

// QueryOutcome is what became of one query a simulated user made: a
// button press, an inline query or a pre-checkout query. It is a plain
// value, a snapshot.
type QueryOutcome struct {
	QueryID string `json:"query_id"`
	// Kind is QueryCallback, QueryInline or QueryPreCheckout.
	Kind   string `json:"kind"`
	ChatID int64  `json:"chat_id"`
	UserID int64  `json:"user_id"`
	// Asked is when the user acted, from Config.NowFunc.
	Asked time.Time `json:"asked"`
	// Deadline is when answers stop being accepted; zero for none.
	Deadline time.Time  `json:"deadline,omitzero"`
	State    QueryState `json:"state"`
	// AnsweredAt is when the accepted answer came; zero when none did.
	AnsweredAt time.Time `json:"answered_at,omitzero"`
	// Late counts answers refused because they came after the deadline.
	Late int `json:"late"`
	// Repeated counts answers refused because the query was answered
	// already.
	Repeated int `json:"repeated"`
}

// queryState tracks one query for its deadline.
type queryState struct {
	QueryOutcome
	answered bool
}

// deadlineState is the part of the state kept for deadlines and payments.
// Its maps are made on first use.
type deadlineState struct {
	queries  map[string]*queryState
	order    []string // query ids, in the order they were asked
	invoices map[[2]int64]*invoice
	payments map[string]*paymentState // by pre_checkout_query id
	payOrder []string
	nextPay  int64
}

// trackQueryLocked starts the clock of a query the server just made.
func (s *Server) trackQueryLocked(kind, id string, chatID, userID int64) *queryState {
	d := &s.st.dl
	if d.queries == nil {
		d.queries = map[string]*queryState{}
	}
	now := s.now()
	q := &queryState{QueryOutcome: QueryOutcome{QueryID: id, Kind: kind, ChatID: chatID, UserID: userID, Asked: now}}
	if dl := s.cfg.Deadlines.of(kind); dl > 0 {
		q.Deadline = now.Add(dl)
	}
	d.queries[id] = q
	d.order = append(d.order, id)
	return q
}

// expired reports whether q's deadline passed at now.
func (q *queryState) expired(now time.Time) bool {
	return !q.Deadline.IsZero() && now.After(q.Deadline)
}

func (q *queryState) outcome(now time.Time) QueryOutcome {
	o := q.QueryOutcome
	switch {
	case q.answered:
		o.State = QueryAnswered
	case q.expired(now):
		o.State = QueryExpired
	default:
		o.State = QueryWaiting
	}
	return o
}

// admitAnswerLocked checks an answer to query id against its deadline and
// earlier answers: it returns Telegram's refusal, counted in the query's
// outcome, or the query (nil for a query the server does not track, which
// the method itself then refuses).
func (s *Server) admitAnswerLocked(id string) (*queryState, *apiError) {
	q := s.st.dl.queries[id]
	switch {
	case q == nil:
		return nil, nil
	case q.answered:
		q.Repeated++
		return nil, badRequest(tooOld)
	case q.expired(s.now()):
		q.Late++
		s.queryExpiredLocked(q)
		s.pokeLocked()
		return nil, badRequest(tooOld)
	}
	return q, nil
}

// answeredLocked records q's accepted answer.
func (s *Server) answeredLocked(q *queryState) {
	if q != nil {
		q.answered, q.AnsweredAt = true, s.now()
	}
}

// deadlined wraps the method answering queries of kind (whose id is in
// parameter param) with the deadline and once-only checks.
func deadlined(param string, next methodFunc) methodFunc {
	return func(s *Server, p params) (any, *apiError) {
		q, e := s.admitAnswerLocked(p.get(param))
		if e != nil {
			return nil, e
		}
		res, e := next(s, p)
		if e == nil {
			s.answeredLocked(q)
		}
		return res, e
	}
}

// QueryOutcomes returns what became of every query simulated users made
// (button presses, inline queries, pre-checkout queries), in the order
// they were asked. A query past its deadline unanswered reads as
// [QueryExpired] from that moment, without any call.
func (s *Server) QueryOutcomes() []QueryOutcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settlePaymentsLocked()
	now := s.now()
	out := make([]QueryOutcome, 0, len(s.st.dl.order))
	for _, id := range s.st.dl.order {
		out = append(out, s.st.dl.queries[id].outcome(now))
	}
	return out
}

// QueryOutcomeOf returns the outcome of query id, and whether the server
// made such a query.
func (s *Server) QueryOutcomeOf(id string) (QueryOutcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settlePaymentsLocked()
	q, ok := s.st.dl.queries[id]
	if !ok {
		return QueryOutcome{}, false
	}
	return q.outcome(s.now()), true
}
