package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// deadlineStores are the real stores the deadline tests run against.
var deadlineStores = []struct {
	name string
	open func(t *testing.T) intake.Store
}{
	{"sqlite", func(t *testing.T) intake.Store { return sqliteStore(t) }},
	{"postgres", func(t *testing.T) intake.Store {
		pool, err := pgxpool.New(t.Context(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := pgstore.New(t.Context(), pool, pgstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

// buttonChat is a user's private chat holding a bot message with one
// button, "go".
type buttonChat struct {
	user      telegramtest.User
	chat      telegramtest.Chat
	messageID int64
}

func newButtonChat(t *testing.T, srv *telegramtest.Server) buttonChat {
	t.Helper()
	u := srv.NewUser("Ann")
	c, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := botClient(t, srv).Call(t.Context(), "sendMessage", map[string]any{"chat_id": c.ID, "text": "Go?",
		"reply_markup": map[string]any{"inline_keyboard": [][]map[string]string{{{"text": "Go", "callback_data": "go"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		MessageID int64 `json:"message_id"`
	}
	if err := json.Unmarshal(raw, &sent); err != nil {
		t.Fatal(err)
	}
	return buttonChat{user: u, chat: c, messageID: sent.MessageID}
}

// declined records the calls of a Decliner.
type declined struct {
	mu    sync.Mutex
	calls []string
	ctxOK bool // every call's context ended at the update's deadline
}

func (d *declined) Decline(ctx context.Context, u intake.Update, kind string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	dl, ok := ctx.Deadline()
	d.ctxOK = (len(d.calls) == 0 || d.ctxOK) && ok && dl.Equal(u.Deadline) && u.Deadline.Equal(u.ReceivedAt.Add(15*time.Second))
	d.calls = append(d.calls, kind+"/"+u.Kind)
	return nil
}

func (d *declined) get() ([]string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...), d.ctxOK
}

// A callback query is forwarded, and completes, while its chat's message
// is held failing, waiting for its retry.
func TestDeadlineCallbackQueryOvertakesHeldMessage(t *testing.T) {
	t.Parallel()
	for _, sk := range deadlineStores {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeTelegram(t)
			bc := newButtonChat(t, srv)
			msg, err := srv.SendText(bc.chat, bc.user, "first")
			if err != nil {
				t.Fatal(err)
			}
			ep := newBotEndpoint(t, func(id int64, n int) (int, string) {
				if id == msg.ID {
					return http.StatusInternalServerError, "" // retried an hour later: it holds its chat
				}
				return http.StatusOK, ""
			})
			rec := newRecorder()
			cfg := baseConfig(t, srv, ep, &testkit.SyncBuffer{}, rec)
			cfg.Store = sk.open(t)
			cfg.BackoffBase = time.Hour
			start(t, cfg)
			testkit.WaitFor(t, "the message's first attempt to fail", func() bool { return rec.count(string(relay.KindFailed)) == 1 })
			press, err := srv.PressButton(bc.chat, bc.user, bc.messageID, "go")
			if err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "the callback query to complete", func() bool {
				for _, e := range rec.all(relay.KindSettled) {
					if e.ID.UpdateID == press.ID && e.State == intake.StateCompleted {
						return true
					}
				}
				return false
			})
			row, ok, err := cfg.Store.(intake.AdminStore).Get(t.Context(), msg.ID)
			if err != nil || !ok || row.State != intake.StateFailed || row.Attempts != 1 {
				t.Fatalf("message row %+v (%v, %v): want failed after 1 attempt, still held", row, ok, err)
			}
			if n := len(ep.hitsOf(press.ID)); n != 1 {
				t.Fatalf("callback query forwarded %d times, want once", n)
			}
		})
	}
}

// A callback query the app keeps failing is not retried past its deadline:
// it ends expired (counted, shown, declined once), never an exhaustion and
// never POSTed to the exhaustion endpoint, while a message the app refuses
// outright still is.
func TestDeadlineFailingCallbackQueryExpires(t *testing.T) {
	t.Parallel()
	for _, sk := range deadlineStores {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeTelegram(t)
			bc := newButtonChat(t, srv)
			press, err := srv.PressButton(bc.chat, bc.user, bc.messageID, "go")
			if err != nil {
				t.Fatal(err)
			}
			other := newButtonChat(t, srv)
			refused, err := srv.SendText(other.chat, other.user, "refused")
			if err != nil {
				t.Fatal(err)
			}
			ep := newBotEndpoint(t, func(id int64, n int) (int, string) {
				if id == refused.ID {
					return http.StatusBadRequest, "" // given up at once: an exhaustion
				}
				return http.StatusInternalServerError, "" // retryable, but the next try is an hour away
			})
			rec := newRecorder()
			dec := &declined{}
			cfg := baseConfig(t, srv, ep, &testkit.SyncBuffer{}, rec)
			cfg.Store = sk.open(t)
			cfg.BackoffBase = time.Hour
			cfg.Forward.ExhaustionURL = ep.exhaustionURL()
			cfg.Deadlines.Decliner = dec
			start(t, cfg)
			testkit.WaitFor(t, "the callback query to expire and the message's exhaustion to be delivered", func() bool {
				return rec.count(string(relay.KindExpired)) == 1 && rec.count(string(relay.KindAcknowledged)) == 1
			})
			testkit.WaitFor(t, "the decline", func() bool { calls, _ := dec.get(); return len(calls) == 1 })
			if e := rec.all(relay.KindExpired)[0]; e.ID.UpdateID != press.ID || e.Reason != intake.KindCallbackQuery {
				t.Fatalf("expired event %+v, want update %d, callback_query", e, press.ID)
			}
			if p := ep.exhaustionPayloads()[0]; p.UpdateID != refused.ID {
				t.Fatalf("exhaustion delivered for update %d, want only the refused message %d", p.UpdateID, refused.ID)
			}
			if n := rec.count(string(relay.KindExhausted)); n != 1 {
				t.Fatalf("%d exhaustions, want 1 (the message's)", n)
			}
			if n := len(ep.hitsOf(press.ID)); n != 1 {
				t.Fatalf("callback query forwarded %d times, want once: a retry an hour away cannot be in time", n)
			}
			failed := rec.all(relay.KindFailed)
			for _, e := range failed {
				if e.ID.UpdateID == press.ID && (e.Retrying || !e.Expiring) {
					t.Fatalf("failure event %+v: want not retrying, expiring", e)
				}
			}
			calls, ctxOK := dec.get()
			if len(calls) != 1 || calls[0] != "callback_query/callback_query" || !ctxOK {
				t.Fatalf("decliner calls %q (deadline context %v), want one for the callback query, bounded by its deadline", calls, ctxOK)
			}
			row, ok, err := cfg.Store.(intake.AdminStore).Get(t.Context(), press.ID)
			if err != nil || !ok || !row.Expired() || row.StateName() != "expired" || row.Unacknowledged() {
				t.Fatalf("callback query row %+v (%v, %v): want expired, settled", row, ok, err)
			}
			st, err := cfg.Store.(intake.AdminStore).Stats(t.Context())
			if err != nil || st.Unacknowledged != 0 {
				t.Fatalf("stats %+v, %v: want no unacknowledged exhaustion (the message's was delivered and acknowledged)", st, err)
			}
		})
	}
}

// A deadline turned off (-1) makes a callback query an ordinary update:
// held behind its chat's failing message.
func TestDeadlineOffCallbackQueryWaitsForItsChat(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	bc := newButtonChat(t, srv)
	msg, err := srv.SendText(bc.chat, bc.user, "first")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	ep := newBotEndpoint(t, func(id int64, n int) (int, string) {
		if id == msg.ID && n == 1 {
			return http.StatusInternalServerError, ""
		}
		if id == msg.ID {
			<-release // the retry waits until the callback query is recorded
		}
		return http.StatusOK, ""
	})
	rec := newRecorder()
	cfg := baseConfig(t, srv, ep, &testkit.SyncBuffer{}, rec)
	cfg.Deadlines.CallbackQuery = -1
	start(t, cfg)
	testkit.WaitFor(t, "the message's retry to be forwarded", func() bool { return len(ep.hitsOf(msg.ID)) == 2 })
	press, err := srv.PressButton(bc.chat, bc.user, bc.messageID, "go")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the callback query to be recorded", func() bool { return rec.count(string(relay.KindAccepted)) == 2 })
	close(release)
	testkit.WaitFor(t, "both updates to complete", func() bool { return rec.count(string(relay.KindSettled)) == 3 })
	// The callback query was claimed only once the message's retry had
	// been answered: it waited on its chat's line.
	if h := ep.hitsOf(press.ID); len(h) != 1 {
		t.Fatalf("callback query forwarded %d times", len(h))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	msgDone, pressClaimed := -1, -1
	for i, e := range rec.events {
		if e.Kind == relay.KindForwarded && e.ID.UpdateID == msg.ID && e.Err == nil {
			msgDone = i
		}
		if e.Kind == relay.KindClaimed && e.ID.UpdateID == press.ID {
			pressClaimed = i
		}
	}
	if msgDone < 0 || pressClaimed < msgDone {
		t.Fatalf("the callback query was claimed at event %d, the message's retry was answered at event %d: want after it", pressClaimed, msgDone)
	}
}

func TestDeadlineConfigNamesTheField(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), &testkit.SyncBuffer{}, newRecorder())
	cfg.Deadlines.PreCheckoutQuery = -3 * time.Second
	_, err := relay.New(cfg)
	var ce *relay.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Deadlines.PreCheckoutQuery" {
		t.Fatalf("New = %v, want a ConfigError for Deadlines.PreCheckoutQuery", err)
	}
}
