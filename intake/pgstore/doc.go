// Package pgstore is an [intake.DurableStore] on PostgreSQL, for bots whose
// intake runs in many processes on many machines sharing one database.
//
// [New] wraps the caller's [pgxpool.Pool] (github.com/jackc/pgx/v5). By
// default it creates the table, or upgrades one made by an earlier version;
// with [Config.NoCreate] the application's own migrations apply [Schema] (or
// the numbered steps of [Migrations]) instead.
//
// # Fencing a domain write
//
// A lease cannot stop a handler that already started, so a handler that
// must not write after losing its update checks ownership inside the
// transaction of its write. The check locks the update's row (FOR UPDATE)
// until that transaction ends, so no other worker can reclaim the update in
// between:
//
//   - [Store.OwnsTx] takes the caller's pgx transaction;
//   - [Store.OwnsSQLTx] takes a database/sql transaction (pgx/v5/stdlib);
//   - the SQL function <table>_owns(update_id, attempt, claim_id, at_ms),
//     created by the schema, gives the same fence to an application in any
//     language.
//
// Ownership alone makes a write safe from a stale worker; to make an effect
// happen exactly once, also skip it inside the same transaction when it was
// already made by an earlier attempt that committed but crashed before
// settling.
//
// # Schema
//
// One row per update, times in Unix milliseconds of the intake's clock,
// bodies as bytea, and partial indexes over the live rows, the settled rows
// and the unacknowledged exhaustions, so that retained completed rows cost
// the sweep nothing. Migration 1 is the table without claim identities; the
// base methods never need more, so an application that kept such a table can
// keep using them. Migration 2 adds claim_id and the fence function, which
// the fenced and durable methods need; without it they fail with
// [ErrNotMigrated].
package pgstore
