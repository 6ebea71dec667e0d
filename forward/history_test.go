package forward_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// TestAttemptRecordKeepsTheAppsAnswer: the record of a forwarded attempt
// keeps the app's status, the chosen headers and the start of its body,
// masked by the runner's redactor, and no cookie; a later success keeps the
// failed attempt's record.
func TestAttemptRecordKeepsTheAppsAnswer(t *testing.T) {
	t.Parallel()
	const token = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"
	app, appSrv := newEndpoint(t, http.StatusBadRequest, http.Header{
		"Content-Type": {"application/json"},
		"Set-Cookie":   {"session=app-session-cookie"},
		"X-Request-Id": {"req-7 registered-secret-value"},
		"Location":     {"/elsewhere"},
		"Retry-After":  {"7"},
	})
	app.body = []byte(`{"error":"chat not found","url":"https://api.telegram.org/bot` + token + `/sendMessage","pad":"` +
		strings.Repeat("y", 2*intake.MaxAttemptBody) + `"}`)
	f := newForwarder(t, forward.Config{URL: appSrv.URL})
	st := memstore.New()
	red := &botapi.Redactor{}
	red.Add("registered-secret-value")
	r, err := intake.New(intake.Config{Store: st, AttemptHandler: f.Handle, Redactor: red, KeepExhaustions: true,
		PendingGrace: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if _, err := r.Accept(t.Context(), []byte(`{"update_id":1,"message":{"chat":{"id":5},"text":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Idle(t.Context()); err != nil {
		t.Fatal(err)
	}
	app.mu.Lock()
	app.status, app.header, app.body = http.StatusOK, nil, []byte(`{"ok":true}`)
	app.mu.Unlock()
	if ok, err := st.Requeue(t.Context(), 1, time.Now()); err != nil || !ok {
		t.Fatalf("Requeue = %v, %v", ok, err)
	}
	// A sweep lists a pending row received at or before its clock (in
	// whole milliseconds, as the stores keep time) minus the pending grace,
	// here 1ns: a sweep in the millisecond the update was received lists
	// nothing, and a later one lists it. (The first attempt is no longer
	// queued here: Idle returned after it.)
	for scheduled := 0; scheduled == 0; {
		if scheduled, err = r.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := r.Idle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	steps, _, _, err := intake.History(t.Context(), st, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 || steps[0].Outcome != intake.AttemptFailed || steps[1].Outcome != intake.AttemptRequeued || steps[2].Outcome != intake.AttemptCompleted {
		var got []intake.AttemptOutcome
		for _, s := range steps {
			got = append(got, s.Outcome)
		}
		t.Fatalf("timeline %v; want failed, requeued, completed", got)
	}
	failed := steps[0]
	if failed.Status != http.StatusBadRequest || failed.Header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(failed.Header.Get("X-Request-Id"), "req-7 ") || failed.Header.Get("Location") != "/elsewhere" || failed.Header.Get("Retry-After") != "7" || failed.Header.Get("Set-Cookie") != "" {
		t.Errorf("failed attempt: status %d, header %v; want 400 with the chosen headers and no cookie", failed.Status, failed.Header)
	}
	if !strings.Contains(string(failed.Body), "chat not found") || len(failed.Body) > intake.MaxAttemptBody {
		t.Errorf("failed attempt's body (%d bytes) %.80q: want the app's words, at most %d bytes", len(failed.Body), failed.Body, intake.MaxAttemptBody)
	}
	all := string(failed.Body) + failed.Error + failed.Header.Get("X-Request-Id")
	for _, secret := range []string{"AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ", "registered-secret-value"} {
		if strings.Contains(all, secret) {
			t.Errorf("the attempt record keeps %q: %s", secret, all)
		}
	}
	if done := steps[2]; done.Status != http.StatusOK || string(done.Body) != `{"ok":true}` {
		t.Errorf("completed attempt: status %d, body %q", done.Status, done.Body)
	}
}
