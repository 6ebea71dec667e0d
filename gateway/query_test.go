package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// pressed has the bot send a button to f's chat, the user press it, and
// returns the callback query's id.
func (f *fixture) pressed(t *testing.T) string {
	t.Helper()
	r := f.post(t, "/bot"+f.tg.Token+"/sendMessage", nil, map[string]any{"chat_id": f.chat.ID, "text": "Sure?",
		"reply_markup": json.RawMessage(`{"inline_keyboard":[[{"text":"Yes","callback_data":"yes"}]]}`)})
	var m struct {
		MessageID int64 `json:"message_id"`
	}
	if err := json.Unmarshal(r.env.Result, &m); err != nil || m.MessageID == 0 {
		t.Fatalf("sendMessage = %d %s", r.status, r.body)
	}
	upd, err := f.tg.PressButton(f.chat, telegramtest.User{ID: f.chat.UserID}, m.MessageID, "yes")
	if err != nil {
		t.Fatal(err)
	}
	return upd.CallbackQueryID
}

// TestOneAnswerPerQuery: answers to one query are journaled by the query,
// not by their parameters. The first is sent; a second with other words,
// from the same attempt or a later one, and in any spelling of the method,
// gets the first's answer replayed, and Telegram sees one answer.
func TestOneAnswerPerQuery(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	qid := f.pressed(t)
	id := f.claim(t, 31)
	path := "/bot" + f.tg.Token + "/answerCallbackQuery"

	first := f.post(t, path, &id, map[string]any{"callback_query_id": qid})
	if first.status != 200 || !first.env.OK || first.header.Get(gateway.HeaderReplayed) != "" {
		t.Fatalf("first answer = %d %s", first.status, first.body)
	}
	again := f.post(t, "/bot"+f.tg.Token+"/answercallbackquery", &id, map[string]any{"callback_query_id": qid, "text": "Done!"})
	if again.status != 200 || again.header.Get(gateway.HeaderReplayed) != "true" || string(again.body) != string(first.body) {
		t.Errorf("second answer, same attempt = %d %v %s", again.status, again.header, again.body)
	}
	f.fail(t, id)
	id2 := f.reclaim(t, 31)
	later := f.post(t, path, &id2, map[string]any{"callback_query_id": qid, "text": "Retry", "show_alert": true})
	if later.status != 200 || later.header.Get(gateway.HeaderReplayed) != "true" {
		t.Errorf("answer of a later attempt = %d %v %s", later.status, later.header, later.body)
	}
	if got := f.tg.CallbackAnswers(); len(got) != 1 || got[0].Text != "" {
		t.Errorf("Telegram saw %+v; want the first answer only", got)
	}
	entries, err := f.store.Journal(t.Context(), 31)
	if err != nil || len(entries) != 1 || entries[0].Call.Method != "answerCallbackQuery" || entries[0].Outcome != intake.CallAnswered {
		t.Errorf("journal = %+v, %v; want one answered answerCallbackQuery", entries, err)
	}
}

// TestQueryAnswersTakeTurns: many answers to one query at once, each with
// other words: exactly one reaches Telegram and every other is the
// journaled answer, replayed (never a pending entry read as unknown).
func TestQueryAnswersTakeTurns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	qid := f.pressed(t)
	id := f.claim(t, 32)
	const n = 8
	var wg sync.WaitGroup
	replies := make([]reply, n)
	for i := range n {
		wg.Go(func() {
			replies[i] = f.post(t, "/bot"+f.tg.Token+"/answerCallbackQuery", &id, map[string]any{"callback_query_id": qid, "text": strconv.Itoa(i)})
		})
	}
	wg.Wait()
	replayed := 0
	for _, r := range replies {
		if r.status != 200 || !r.env.OK {
			t.Errorf("answer = %d %s", r.status, r.body)
		}
		if r.header.Get(gateway.HeaderReplayed) == "true" {
			replayed++
		}
	}
	if replayed != n-1 || len(f.tg.CallbackAnswers()) != 1 {
		t.Errorf("%d replayed, Telegram saw %d answers; want %d and 1", replayed, len(f.tg.CallbackAnswers()), n-1)
	}
}

// TestOtherQueriesAndCallsStayApart: answers to two queries are two
// entries; an answer without a readable query id is journaled by its
// parameters and Telegram's refusal is passed on.
func TestOtherQueriesAndCallsStayApart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	q1, q2 := f.pressed(t), f.pressed(t)
	id := f.claim(t, 33)
	path := "/bot" + f.tg.Token + "/answerCallbackQuery"
	for _, q := range []string{q1, q2} {
		if r := f.post(t, path, &id, map[string]any{"callback_query_id": q}); r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "" {
			t.Errorf("answer to %s = %d %v %s", q, r.status, r.header, r.body)
		}
	}
	r := f.post(t, path, &id, map[string]any{"text": "no id"})
	if r.status != http.StatusBadRequest || !strings.Contains(r.env.Description, "query") {
		t.Errorf("answer without an id = %d %s", r.status, r.body)
	}
	if got := len(f.tg.CallbackAnswers()); got != 2 {
		t.Errorf("Telegram saw %d answers; want 2", got)
	}
	entries, _ := f.store.Journal(t.Context(), 33)
	if len(entries) != 3 {
		t.Errorf("journal = %s; want 3 entries", fmt.Sprint(entries))
	}
}

// TestRefusedAnswerLeavesQueryOpen: Telegram's refusal of an answer that
// leaves the query open (a text too long) does not use up the query: the
// next answer is sent, and the one after it replayed. Its refusal that
// the query is gone is final: later answers get it replayed.
func TestRefusedAnswerLeavesQueryOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	path := "/bot" + f.tg.Token + "/answerCallbackQuery"
	qid := f.pressed(t)
	id := f.claim(t, 34)
	if r := f.post(t, path, &id, map[string]any{"callback_query_id": qid, "text": strings.Repeat("x", 201)}); r.status != 400 || r.header.Get(gateway.HeaderReplayed) != "" {
		t.Fatalf("a too long answer = %d %v %s", r.status, r.header, r.body)
	}
	if r := f.post(t, path, &id, map[string]any{"callback_query_id": qid, "text": "ok"}); r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "" {
		t.Errorf("the corrected answer = %d %v %s; want it sent", r.status, r.header, r.body)
	}
	if r := f.post(t, path, &id, map[string]any{"callback_query_id": qid}); r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "true" {
		t.Errorf("a third answer = %d %v %s; want the second's, replayed", r.status, r.header, r.body)
	}
	if got := f.tg.CallbackAnswers(); len(got) != 1 || got[0].Text != "ok" {
		t.Errorf("Telegram accepted %+v; want the corrected answer only", got)
	}

	gone := "no-such-query"
	id2 := f.claim(t, 35)
	for i, want := range []string{"", "true"} {
		r := f.post(t, path, &id2, map[string]any{"callback_query_id": gone})
		if r.status != 400 || !strings.Contains(r.env.Description, "query is too old") || r.header.Get(gateway.HeaderReplayed) != want {
			t.Errorf("answer %d to a gone query = %d %v %s; want the refusal, replayed=%q", i+1, r.status, r.header, r.body, want)
		}
	}
	if n := f.tg.Calls()["answerCallbackQuery"]; n != 3 {
		t.Errorf("Telegram got %d answerCallbackQuery calls; want 3 (the gone query's refusal is replayed)", n)
	}
}
