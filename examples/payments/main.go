// Command payments is an app behind `tgrelay serve` on PostgreSQL that
// fulfils every purchase exactly once, through retries, kills of serve and
// kills of itself.
//
// A successful_payment update means the user has paid: the one update a bot
// must never lose and never apply twice. serve delivers it at least once
// (it has no deadline and never expires); this app makes the fulfilment
// happen once, by writing it in one transaction with a fence that
//
//   - checks that the forward's attempt (the headers Tgrelay-Update-Id,
//     Tgrelay-Attempt, Tgrelay-Claim-Id) still owns the update, so a stale
//     attempt never writes, and
//   - records the effect "payment:<telegram_payment_charge_id>" for the
//     update, so a retry of an update whose fulfilment committed (the app
//     answered too late, serve was killed before it settled) skips it.
//
// Two fences, the same promise:
//
//   - -fence go (the default): [pgstore.Store.Once], from Go.
//   - -fence sql: the SQL function telegram_updates_once inside the app's
//     own transaction ([onceSQL], [fulfilSQL]), the way an app in any
//     language does it (see the README's "Payments exactly once").
//
// Run it next to serve, on serve's database:
//
//	tgrelay serve --db postgres://… --forward http://127.0.0.1:8090/update &
//	go run ./examples/payments -db postgres://… -listen 127.0.0.1:8090
//
// It creates its table purchases (one row per fulfilment) if missing, and
// logs one line per successful_payment: "fulfilled", "already fulfilled"
// or "stale attempt". Other updates are answered 200 and ignored.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/wire"
)

// schemaSQL is the app's own table. It has no unique key on charge_id on
// purpose: the fence alone keeps a purchase to one row, and a test that
// counts rows per charge sees any double.
const schemaSQL = `CREATE TABLE IF NOT EXISTS purchases (
    charge_id    text        NOT NULL,
    user_id      bigint      NOT NULL,
    payload      text        NOT NULL,
    currency     text        NOT NULL,
    total_amount bigint      NOT NULL,
    update_id    bigint      NOT NULL,
    attempt      integer     NOT NULL,
    fulfilled_at timestamptz NOT NULL DEFAULT now()
)`

// onceSQL is the fence for any language: $1 update id, $2 attempt, $3 claim
// id (the three headers), $4 telegram_payment_charge_id. NULL for the time
// judges the lease at the database's clock. True means "fulfil now, in this
// transaction"; false means "do nothing": a stale attempt, or this payment
// was fulfilled already.
const onceSQL = `SELECT telegram_updates_once($1, $2, $3, NULL, 'payment:' || $4)`

// ownsSQL tells a stale attempt from a payment fulfilled already, after
// onceSQL answered false: false means stale (answer 503, not a 4xx).
const ownsSQL = `SELECT telegram_updates_owns($1, $2, $3)`

// fulfilSQL is the fulfilment, made only when onceSQL answered true, in its
// transaction: $1 charge id, $2 user id, $3 invoice payload, $4 currency,
// $5 total amount, $6 update id, $7 attempt.
const fulfilSQL = `INSERT INTO purchases (charge_id, user_id, payload, currency, total_amount, update_id, attempt)
VALUES ($1, $2, $3, $4, $5, $6, $7)`

// maxBody bounds a forwarded update's body.
const maxBody = 1 << 20

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, logw io.Writer) error {
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	fs.SetOutput(logw)
	db := fs.String("db", "", "serve's PostgreSQL `URL` (required)")
	listen := fs.String("listen", "127.0.0.1:8090", "`address` to receive serve's forwards on (path /update)")
	fence := fs.String("fence", "go", "how to fence the fulfilment: go (pgstore.Store.Once) or sql (telegram_updates_once in the app's transaction)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" {
		return errors.New("-db is required")
	}
	if *fence != "go" && *fence != "sql" {
		return fmt.Errorf("-fence is %q, want go or sql", *fence)
	}
	pool, err := pgxpool.New(ctx, *db)
	if err != nil {
		return errors.New("-db: not a PostgreSQL URL") // pgx may quote the password
	}
	defer pool.Close()
	a, err := newApp(ctx, pool, *fence == "sql", log.New(logw, "", log.LstdFlags|log.Lmicroseconds))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /update", a)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	a.log.Printf("listening on %s, fence %s", ln.Addr(), *fence)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// app handles serve's forwards. It is safe for concurrent use.
type app struct {
	store *pgstore.Store
	pool  *pgxpool.Pool
	sql   bool // fence with onceSQL instead of Store.Once
	log   *log.Logger
}

func newApp(ctx context.Context, pool *pgxpool.Pool, sqlFence bool, l *log.Logger) (*app, error) {
	// pgstore.New brings serve's table to the current schema (under an
	// advisory lock) if the app starts first; the app only uses Once.
	store, err := pgstore.New(ctx, pool, pgstore.Config{})
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, schemaSQL); err != nil {
		return nil, fmt.Errorf("create purchases: %w", err)
	}
	return &app{store: store, pool: pool, sql: sqlFence, log: l}, nil
}

// update is the part of an update this app reads.
type update struct {
	UpdateID int64 `json:"update_id"`
	Message  *struct {
		From *struct {
			ID int64 `json:"id"`
		} `json:"from"`
		SuccessfulPayment *payment `json:"successful_payment"`
	} `json:"message"`
}

// payment is Telegram's SuccessfulPayment.
type payment struct {
	Currency       string `json:"currency"`
	TotalAmount    int64  `json:"total_amount"`
	InvoicePayload string `json:"invoice_payload"`
	ChargeID       string `json:"telegram_payment_charge_id"`
}

// ServeHTTP answers 200 once the purchase is fulfilled (now or before), 5xx
// when it must be retried, 400 for a body that is not an update.
func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := identity(r.Header)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var u update
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&u); err != nil {
		http.Error(w, "not an update", http.StatusBadRequest)
		return
	}
	if u.Message == nil || u.Message.SuccessfulPayment == nil {
		w.WriteHeader(http.StatusOK) // nothing to fulfil
		return
	}
	p := u.Message.SuccessfulPayment
	var user int64
	if u.Message.From != nil {
		user = u.Message.From.ID
	}
	if p.ChargeID == "" {
		http.Error(w, "successful_payment without telegram_payment_charge_id", http.StatusBadRequest)
		return
	}
	applied, err := a.fulfil(r.Context(), id, user, p)
	switch {
	case errors.Is(err, intake.ErrNotOwner):
		// A stale attempt: another attempt owns the update now and will
		// fulfil it. Nothing was written. 503, not a 4xx: serve ends an
		// update answered 4xx as an exhaustion, and this one is not done.
		a.log.Printf("stale attempt update=%d attempt=%d charge=%s", id.UpdateID, id.Attempt, p.ChargeID)
		http.Error(w, "stale attempt", http.StatusServiceUnavailable)
	case err != nil:
		a.log.Printf("failed update=%d attempt=%d charge=%s: %v", id.UpdateID, id.Attempt, p.ChargeID, err)
		http.Error(w, "fulfilment failed, retry", http.StatusServiceUnavailable) // serve retries
	case applied:
		a.log.Printf("fulfilled update=%d attempt=%d charge=%s", id.UpdateID, id.Attempt, p.ChargeID)
		w.WriteHeader(http.StatusOK)
	default:
		a.log.Printf("already fulfilled update=%d attempt=%d charge=%s", id.UpdateID, id.Attempt, p.ChargeID)
		w.WriteHeader(http.StatusOK)
	}
}

// fulfil writes the purchase once per charge: the fence and the write
// commit together or not at all. applied is false when the purchase was
// fulfilled already; an error matching intake.ErrNotOwner means a stale
// attempt.
func (a *app) fulfil(ctx context.Context, id intake.Identity, user int64, p *payment) (applied bool, err error) {
	if a.sql {
		return a.fulfilSQL(ctx, id, user, p)
	}
	return a.store.Once(ctx, id, "payment:"+p.ChargeID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, fulfilSQL, p.ChargeID, user, p.InvoicePayload, p.Currency, p.TotalAmount, id.UpdateID, id.Attempt)
		return err
	})
}

// fulfilSQL is fulfil the way an app in any language does it: onceSQL,
// then the write only when it answered true, in one transaction.
func (a *app) fulfilSQL(ctx context.Context, id intake.Identity, user int64, p *payment) (bool, error) {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var once bool
	if err := tx.QueryRow(ctx, onceSQL, id.UpdateID, id.Attempt, id.ClaimID, p.ChargeID).Scan(&once); err != nil {
		return false, err
	}
	if !once {
		// Stale, or fulfilled already: the SQL cannot say which. Ask
		// telegram_updates_owns to tell them apart (for the log and the
		// status code only; neither writes).
		var owns bool
		if err := tx.QueryRow(ctx, ownsSQL, id.UpdateID, id.Attempt, id.ClaimID).Scan(&owns); err != nil {
			return false, err
		}
		if !owns {
			return false, fmt.Errorf("update %d attempt %d: %w", id.UpdateID, id.Attempt, intake.ErrNotOwner)
		}
		return false, nil
	}
	if _, err := tx.Exec(ctx, fulfilSQL, p.ChargeID, user, p.InvoicePayload, p.Currency, p.TotalAmount, id.UpdateID, id.Attempt); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// identity reads the attempt's identity from the forward's headers.
func identity(h http.Header) (intake.Identity, error) {
	u, at, claim, err := wire.ParseIdentity(h.Get(wire.HeaderUpdateID), h.Get(wire.HeaderAttempt), h.Get(wire.HeaderClaimID))
	if err != nil {
		return intake.Identity{}, fmt.Errorf("the headers %s, %s and %s: %w", wire.HeaderUpdateID, wire.HeaderAttempt, wire.HeaderClaimID, err)
	}
	return intake.Identity{UpdateID: u, Attempt: at, ClaimID: claim}, nil
}
