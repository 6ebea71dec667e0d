package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// A handler's error may quote any bytes: a NUL, invalid UTF-8. PostgreSQL's
// text holds neither, so a settlement carrying such a text failed, the
// update stayed processing, and each reclaim ran it and failed it again,
// never to be given up. The runner stores the text with those bytes
// replaced instead.
func TestHandlerErrorOfAnyBytesIsSettled(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	r, err := intake.New(intake.Config{Store: st, MaxAttempts: 1,
		Handler: func(context.Context, intake.Update) error { return errors.New("app said \x00 and \xff\xfe") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if a, err := r.Accept(t.Context(), []byte(`{"update_id":5,"message":{"chat":{"id":1}}}`)); err != nil || a != intake.Accepted {
		t.Fatalf("Accept = %v, %v", a, err)
	}
	var row intake.Row
	testkit.WaitFor(t, "update 5 given up", func() bool {
		row, _, _ = st.Get(t.Context(), 5)
		return row.State == intake.StateAbandoned
	})
	if !strings.Contains(row.Error, "app said") || !utf8.ValidString(row.Error) || strings.IndexByte(row.Error, 0) >= 0 {
		t.Errorf("stored error %q: want the handler's text, valid UTF-8 without NUL", row.Error)
	}
}
