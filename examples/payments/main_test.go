package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/wire"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type bundle struct {
	app  *app
	pool *pgxpool.Pool
	logs *bytes.Buffer
}

func setup(t *testing.T, sqlFence bool) bundle {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logs bytes.Buffer
	a, err := newApp(t.Context(), pool, sqlFence, log.New(&logs, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	return bundle{app: a, pool: pool, logs: &logs}
}

func paymentUpdate(id int64, charge string) []byte {
	return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"date":1767225600,"chat":{"id":42,"type":"private"},"from":{"id":42,"is_bot":false,"first_name":"Ada"},`+
		`"successful_payment":{"currency":"XTR","total_amount":250,"invoice_payload":"order-%d","telegram_payment_charge_id":"%s","provider_payment_charge_id":""}}}`, id, id, id, charge)
}

// forwardTo posts body to the app as serve's forward does, under id.
func (b bundle) forwardTo(t *testing.T, id intake.Identity, body []byte) int {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/update", bytes.NewReader(body))
	r.Header.Set(wire.HeaderUpdateID, strconv.FormatInt(id.UpdateID, 10))
	r.Header.Set(wire.HeaderAttempt, strconv.Itoa(id.Attempt))
	r.Header.Set(wire.HeaderClaimID, id.ClaimID)
	w := httptest.NewRecorder()
	b.app.ServeHTTP(w, r)
	return w.Code
}

func (b bundle) rows(t *testing.T, charge string) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM purchases WHERE charge_id = $1`, charge).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// claim records the update and claims it as serve would, at now, leased
// until until.
func (b bundle) claim(t *testing.T, updateID int64, body []byte, now, until time.Time, add bool) intake.Identity {
	t.Helper()
	if add {
		if _, err := b.app.store.Add(t.Context(), intake.Incoming{UpdateID: updateID, Body: body, ReceivedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	id, ok, err := b.app.store.Claim(t.Context(), updateID, intake.ClaimOpts{Now: now, LeaseUntil: until, MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("claim %d = %v, %v", updateID, ok, err)
	}
	return id
}

// A payment is fulfilled once through a repeated forward of the same
// attempt (its answer lost), a retry under a new attempt, and a stale
// attempt that arrives late; with either fence.
func TestFulfilsOncePerCharge(t *testing.T) {
	t.Parallel()
	for _, fence := range []string{"go", "sql"} {
		t.Run(fence, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fence == "sql")
			body := paymentUpdate(7, "ch_7")
			now := time.Now().Truncate(time.Millisecond)
			// The first attempt's lease ended a minute ago: a stale one.
			stale := b.claim(t, 7, body, now.Add(-time.Hour), now.Add(-time.Minute), true)
			live := b.claim(t, 7, body, now, now.Add(time.Minute), false)

			if code := b.forwardTo(t, stale, body); code != http.StatusServiceUnavailable {
				t.Errorf("stale attempt answered %d, want 503 (serve retries; a 4xx would make it an exhaustion)", code)
			}
			if n := b.rows(t, "ch_7"); n != 0 {
				t.Fatalf("a stale attempt wrote %d purchases", n)
			}
			for i := range 3 {
				if code := b.forwardTo(t, live, body); code != http.StatusOK {
					t.Fatalf("forward %d answered %d, want 200", i+1, code)
				}
				if n := b.rows(t, "ch_7"); n != 1 {
					t.Fatalf("after forward %d: %d purchases for ch_7, want 1", i+1, n)
				}
			}
			// A retry under a new attempt (the first one's answer never
			// reached serve).
			retry := b.claim(t, 7, body, now.Add(2*time.Minute), now.Add(3*time.Minute), false)
			if code := b.forwardTo(t, retry, body); code != http.StatusOK {
				t.Fatalf("retry answered %d, want 200", code)
			}
			if n := b.rows(t, "ch_7"); n != 1 {
				t.Fatalf("after the retry: %d purchases, want 1", n)
			}
			for _, want := range []string{"stale attempt update=7 attempt=1", "fulfilled update=7 attempt=2", "already fulfilled update=7 attempt=2", "already fulfilled update=7 attempt=3"} {
				if !strings.Contains(b.logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, b.logs.String())
				}
			}
		})
	}
}

// Updates other than successful_payment are answered 200 and write
// nothing; a forward without the identity headers is refused.
func TestIgnoresOtherUpdates(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	body := []byte(`{"update_id":9,"message":{"message_id":1,"date":1767225600,"chat":{"id":42,"type":"private"},"text":"hi"}}`)
	now := time.Now().Truncate(time.Millisecond)
	id := b.claim(t, 9, body, now, now.Add(time.Minute), true)
	if code := b.forwardTo(t, id, body); code != http.StatusOK {
		t.Fatalf("a text message answered %d, want 200", code)
	}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/update", bytes.NewReader(paymentUpdate(9, "ch_9")))
	w := httptest.NewRecorder()
	b.app.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("a forward without identity headers answered %d, want 400", w.Code)
	}
	var n int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM purchases`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("purchases = %d, %v; want none", n, err)
	}
}

// The README's recipe quotes the SQL this app runs, verbatim, so the SQL
// an app in another language copies is the SQL these tests run.
func TestReadmeQuotesTheSQL(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{"onceSQL": onceSQL, "ownsSQL": ownsSQL, "fulfilSQL": fulfilSQL} {
		if !bytes.Contains(readme, []byte(q)) {
			t.Errorf("README.md does not quote %s verbatim:\n%s", name, q)
		}
	}
}

// run refuses a bad -fence and a missing -db before touching anything.
func TestRunFlags(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, args := range [][]string{{}, {"-db", "postgres://x@/y", "-fence", "both"}} {
		var out bytes.Buffer
		if err := run(ctx, args, &out); err == nil {
			t.Errorf("run %q = nil, want an error", args)
		}
	}
}
