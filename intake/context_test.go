package intake_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A handler that receives only a context finds its update and attempt there.
func TestAttemptAndUpdateFromContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		type seen struct {
			u      intake.Update
			a      intake.Attempt
			uok    bool
			aok    bool
			owns   bool
			handed intake.Attempt
		}
		got := make(chan seen, 1)
		r := newRunner(t, intake.Config{
			Store: store,
			AttemptHandler: func(ctx context.Context, _ intake.Update, a intake.Attempt) error {
				// A library hands on a derived context, not the one it got.
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				var s seen
				s.u, s.uok = intake.UpdateFrom(ctx)
				s.a, s.aok = intake.AttemptFrom(ctx)
				s.owns, _ = s.a.Owns(ctx)
				s.handed = a
				got <- s
				return nil
			},
		})
		start(t, r)
		body := []byte(`{"update_id":7,"message":{"message_id":1,"chat":{"id":-1001,"type":"supergroup"},"text":"hi"}}`)
		mustAccept(t, r, body, intake.Accepted)
		idle(t, r)
		s := <-got
		if !s.uok || s.u.ID != 7 || string(s.u.Body) != string(body) || s.u.ChatID != -1001 || s.u.ChatType != "supergroup" {
			t.Errorf("UpdateFrom = %+v, %v; want update 7 of supergroup -1001", s.u, s.uok)
		}
		if !s.aok || s.a.Identity != s.handed.Identity || s.a.ClaimID == "" || !s.owns {
			t.Errorf("AttemptFrom = %+v, %v (owns %v); want the handed attempt %+v, owning", s.a.Identity, s.aok, s.owns, s.handed.Identity)
		}
		if _, ok := intake.AttemptFrom(t.Context()); ok {
			t.Error("AttemptFrom outside a handler reported ok")
		}
		if _, ok := intake.UpdateFrom(t.Context()); ok {
			t.Error("UpdateFrom outside a handler reported ok")
		}
	})
}

// A handler that returns nothing (go-telegram/bot's) fails its attempt
// with ReportError; the reported error goes through the retry policy.
func TestReportErrorFailsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		errSend := errors.New("send failed")
		var late context.Context
		r := newRunner(t, intake.Config{
			Store:       store,
			MaxAttempts: 1,
			Handler: func(ctx context.Context, u intake.Update) error {
				switch u.ID {
				case 1:
					if !intake.ReportError(ctx, errSend) {
						t.Error("ReportError inside a handler reported false")
					}
				case 2:
					intake.ReportError(ctx, nil)
					late = ctx
				case 3:
					intake.ReportError(ctx, intake.Abandon(errSend))
					return errors.New("own error")
				}
				return nil
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return time.Second, true },
		})
		start(t, r)
		for id := int64(1); id <= 3; id++ {
			mustAccept(t, r, msg(id, id), intake.Accepted)
		}
		idle(t, r)
		if got := row(t, store, 1); got.State != intake.StateAbandoned || got.Error != "send failed" {
			t.Errorf("reported: row = %q %q, want abandoned (one attempt) with the reported error", got.State, got.Error)
		}
		if got := row(t, store, 2); got.State != intake.StateCompleted {
			t.Errorf("nil report: row = %q, want completed", got.State)
		}
		if got := row(t, store, 3); got.State != intake.StateAbandoned || got.Error != "own error\nsend failed" {
			t.Errorf("reported and returned: row = %q %q, want both errors", got.State, got.Error)
		}
		if intake.ReportError(late, errSend) {
			t.Error("ReportError after the handler returned reported true")
		}
		if intake.ReportError(t.Context(), errSend) {
			t.Error("ReportError outside a handler reported true")
		}
	})
}

func TestUpdateChat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		id   int64
		typ  string
	}{
		{`{"update_id":1,"message":{"chat":{"id":-100123,"type":"supergroup"},"from":{"id":7}}}`, -100123, "supergroup"},
		{`{"update_id":1,"callback_query":{"from":{"id":7},"message":{"chat":{"id":55,"type":"private"}}}}`, 55, "private"},
		{`{"update_id":1,"inline_query":{"from":{"id":7}}}`, 0, ""},
		{`{"update_id":1,"my_chat_member":{"chat":{"id":"@channel","type":"channel"}}}`, 0, ""},
		{`{"update_id":1,"message":{"chat":{"id":5,"type":7}}}`, 5, ""},
		{`{"update_id":1,"message":{"chat":{"id":5,"type":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}`, 5, ""},
		{`{"update_id":8,"poll":{"id":"p1"}}`, 0, ""},
	} {
		id, typ := intake.ChatOf([]byte(tc.body))
		if id != tc.id || typ != tc.typ {
			t.Errorf("chat of %s = %d %q, want %d %q", tc.body, id, typ, tc.id, tc.typ)
		}
	}
}
