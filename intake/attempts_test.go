package intake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// history returns the timeline of update id.
func history(t *testing.T, s intake.AdminStore, id int64) []intake.AttemptStep {
	t.Helper()
	steps, _, ok, err := intake.History(context.Background(), s, id)
	if err != nil || !ok {
		t.Fatalf("History(%d) = %v, %v", id, ok, err)
	}
	return steps
}

func outcomes(steps []intake.AttemptStep) string {
	var b []string
	for _, s := range steps {
		o := string(s.Outcome)
		if s.Running {
			o = "running"
		}
		b = append(b, fmt.Sprintf("%d:%s", s.Attempt, o))
	}
	return strings.Join(b, " ")
}

// An update that failed twice and then completed keeps all three attempts,
// each with the app's own answer (masked) and its error, through the
// completion; a requeue leaves its mark and the attempts after it count
// from 1 again.
func TestAttemptHistoryKeepsEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const token = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"
		store := memstore.New()
		red := &botapi.Redactor{}
		red.Add("app-secret-value")
		calls := 0
		r := newRunner(t, intake.Config{
			Store:       store,
			MaxAttempts: 3,
			RetryFunc:   func(error, int) (time.Duration, bool) { return time.Second, true },
			Redactor:    red,
			Handler: func(ctx context.Context, u intake.Update) error {
				calls++
				if calls <= 2 || calls == 4 {
					intake.ReportAnswer(ctx, intake.AttemptAnswer{Status: 500,
						Header: http.Header{"Content-Type": {"text/plain"}, "X-Echo": {"app-secret-value"}},
						Body:   []byte(fmt.Sprintf(`{"ok":false,"description":"call %d failed: POST /bot%s/sendMessage"}`, calls, token))})
					return fmt.Errorf("app answered 500 on call %d: bot%s", calls, token)
				}
				intake.ReportAnswer(ctx, intake.AttemptAnswer{Status: 200, Body: []byte(`{"method":"sendMessage"}`)})
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		for range 3 {
			idle(t, r)
			time.Sleep(2 * time.Second)
		}
		idle(t, r)
		steps := history(t, store, 1)
		if got := outcomes(steps); got != "1:failed 2:failed 3:completed" {
			t.Fatalf("timeline %s, want 1:failed 2:failed 3:completed", got)
		}
		claims := map[string]bool{}
		for i, s := range steps {
			text := s.Error + string(s.Body) + fmt.Sprint(s.Header)
			if strings.Contains(text, "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ") || strings.Contains(text, "app-secret-value") {
				t.Errorf("attempt %d keeps a secret: %s", s.Attempt, text)
			}
			if s.Derived || s.ClaimID == "" || claims[s.ClaimID] || s.Process == "" {
				t.Errorf("attempt %d: derived %v, claim %q, process %q: want a recorded attempt with its own claim and process", s.Attempt, s.Derived, s.ClaimID, s.Process)
			}
			claims[s.ClaimID] = true
			if s.EndedAt.Before(s.StartedAt) || s.StartedAt.IsZero() {
				t.Errorf("attempt %d ran from %v to %v", s.Attempt, s.StartedAt, s.EndedAt)
			}
			if i < 2 {
				if s.Status != 500 || !strings.Contains(s.Error, fmt.Sprintf("on call %d", i+1)) ||
					!strings.Contains(string(s.Body), fmt.Sprintf("call %d failed", i+1)) || s.Header.Get("Content-Type") != "text/plain" {
					t.Errorf("failed attempt %d: status %d, error %q, body %q, header %v", s.Attempt, s.Status, s.Error, s.Body, s.Header)
				}
			} else if s.Status != 200 || s.Error != "" || string(s.Body) != `{"method":"sendMessage"}` {
				t.Errorf("completed attempt: status %d, error %q, body %q", s.Status, s.Error, s.Body)
			}
		}
	})
}

// A requeued update keeps its earlier attempts, shows the requeue, and
// numbers the attempts after it from 1.
func TestAttemptHistoryAcrossRequeue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		fail := true
		r := newRunner(t, intake.Config{
			Store:       store,
			MaxAttempts: 1,
			Handler: func(context.Context, intake.Update) error {
				if fail {
					return errors.New("no such chat")
				}
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		fail = false
		if ok, err := store.Requeue(t.Context(), 1, time.Now()); err != nil || !ok {
			t.Fatalf("Requeue = %v, %v", ok, err)
		}
		time.Sleep(time.Minute) // past the pending grace
		sweep(t, r)
		idle(t, r)
		if got := outcomes(history(t, store, 1)); got != "1:failed 0:requeued 1:completed" {
			t.Fatalf("timeline %s, want 1:failed 0:requeued 1:completed", got)
		}
	})
}

// An attempt whose process died records nothing; the timeline derives it
// as crashed from the row's attempt counter once the update was taken over.
func TestAttemptHistoryDerivesCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		nowT := time.Now()
		if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: msg(1, 1), ReceivedAt: nowT}); err != nil {
			t.Fatal(err)
		}
		// A process that claimed it and died: nobody records its end.
		if _, ok, err := store.Claim(t.Context(), 1, intake.ClaimOpts{Now: nowT, LeaseUntil: nowT.Add(time.Second), MaxAttempts: 5}); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if got := outcomes(history(t, store, 1)); got != "1:running" {
			t.Fatalf("timeline while claimed %s, want 1:running", got)
		}
		r := newRunner(t, intake.Config{Store: store, MaxAttempts: 5, Handler: func(context.Context, intake.Update) error { return nil }})
		time.Sleep(2 * time.Second)
		start(t, r)
		sweep(t, r)
		idle(t, r)
		steps := history(t, store, 1)
		if got := outcomes(steps); got != "1:crashed 2:completed" {
			t.Fatalf("timeline %s, want 1:crashed 2:completed", got)
		}
		if !steps[0].Derived || steps[1].Derived {
			t.Errorf("derived flags %v, %v; want the crash derived, the completion recorded", steps[0].Derived, steps[1].Derived)
		}
	})
}

// refusingStore refuses every renewal and settlement: its attempts lose
// their lease (when a renewal comes first) or are found stale.
type refusingStore struct{ *memstore.Store }

func (refusingStore) Renew(context.Context, intake.Identity, time.Time, time.Time) (bool, error) {
	return false, nil
}

func (refusingStore) Settle(context.Context, intake.Identity, intake.Settlement) (bool, error) {
	return false, nil
}

// An attempt whose renewal is refused while its handler runs is recorded
// as lease lost; one whose handler returned before, and whose settlement
// is refused, as stale.
func TestAttemptHistoryLeaseLostAndStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		store := refusingStore{mem}
		r := newRunner(t, intake.Config{
			Store:         store,
			MaxAttempts:   5,
			LeaseDuration: 4 * time.Second,
			Handler: func(ctx context.Context, u intake.Update) error {
				if u.ID == 1 {
					<-ctx.Done() // until the refused renewal takes the lease
					return context.Cause(ctx)
				}
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		mustAccept(t, r, msg(2, 2), intake.Accepted)
		idle(t, r)
		if got := outcomes(history(t, mem, 1)); !strings.HasPrefix(got, "1:lease_lost") {
			t.Errorf("timeline of the update whose renewal was refused: %s, want 1:lease_lost first", got)
		}
		if got := outcomes(history(t, mem, 2)); !strings.HasPrefix(got, "1:stale") {
			t.Errorf("timeline of the update whose settlement was refused: %s, want 1:stale first", got)
		}
	})
}

// An update whose deadline ends its retries is expired with its last
// failure in the stored error: that text is masked like any other failure,
// in the row and in its attempt's record.
func TestExpiredUpdateMasksItsLastFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const registered = "registered-app-secret"
		red := &botapi.Redactor{}
		red.Add(registered)
		store := memstore.New()
		r := newRunner(t, intake.Config{
			Store:    store,
			Redactor: red,
			Handler: func(context.Context, intake.Update) error {
				return errors.New(`telego: answerCallbackQuery: internal execution: request call: http do request: Post "https://api.telegram.org/bot1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ/answerCallbackQuery?s=` + registered + `": EOF`)
			},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		time.Sleep(time.Hour)
		synctest.Wait()
		got := row(t, store, 1)
		if !got.Expired() {
			t.Fatalf("row %+v: want expired", got)
		}
		texts := []string{got.Error}
		for _, s := range history(t, store, 1) {
			texts = append(texts, s.Error)
		}
		for _, text := range texts {
			if strings.Contains(text, registered) || strings.Contains(text, "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ") {
				t.Errorf("stored text keeps a secret: %s", text)
			}
		}
		if !strings.Contains(got.Error, "last failure: telego: answerCallbackQuery") {
			t.Errorf("the row's error lost the last failure: %s", got.Error)
		}
	})
}
