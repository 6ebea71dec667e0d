// Package pgstore is an [intake.Store] on PostgreSQL, for bots whose intake
// runs in many processes on many machines sharing one database. It has
// every optional capability: [intake.ProcessStore], [intake.ChatOrderStore],
// [intake.JournalStore], [intake.AdminStore] and [intake.HealthChecker].
//
// [New] wraps the caller's [pgxpool.Pool] (github.com/jackc/pgx/v5). By
// default it creates the table, or applies the migrations it lacks; with
// [Config.NoCreate] the application's own migrations apply [Schema] (or the
// numbered steps of [Migrations]) instead, and New checks the result.
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
//     language; without at_ms (or with NULL) the lease is judged at the
//     database's clock.
//
// Ownership alone makes a write safe from a stale worker, not from a retry
// of the same update (an attempt that wrote, then failed or crashed before
// settling). For exactly-once effects use [Store.Once] ([Store.OnceSQL]
// for database/sql), or the SQL function
// <table>_once(update_id, attempt, claim_id, at_ms, effect) from any
// language: each checks ownership, skips an effect already recorded for the
// update, and records it in the transaction of the write.
//
// # Attempt history
//
// Every ended attempt ([intake.AdminStore.RecordAttempt]) is a row of
// <table>_att, with the app's masked answer, but for the attempt that
// completed its update. A settlement that carries its attempt's record
// ([intake.Settlement.Attempt]) appends it in the settlement's statement,
// so the runner writes once per attempt; a completion keeps it in the
// update's own row instead (rec_* columns, migration 007). A completed row
// never changes again, so that record stays where it is, and the
// completion costs no history row and no index entry of one. Attempts
// lists both kinds in the order recorded. Triggers delete an update's
// history when Prune deletes its row and mark a requeue in the statement
// that requeues, so both stay one step. See attempts.go.
//
// # Processes and clocks
//
// Store is an [intake.ProcessStore]: each runner keeps a heartbeat in
// <table>_procs, its claims record it as their owner, and a processing row
// whose owner's heartbeat lapsed is claimable at once (and counts a crash,
// see [intake.ProcessClaim.MaxCrashes]), so a killed process's updates are
// taken over in seconds instead of a lease.
//
// Every time in the table is the clock of the host that wrote it, as the
// intake contract says. With several hosts, a host whose clock ran ahead
// would see the others' leases and heartbeats end early and take them. The
// store does not switch to the database's clock (the contract and its
// conformance suite pass times in); it refuses to let such a host act:
// every claim and heartbeat statement calls the SQL function
// <table>_clock with this host's clock, which raises, in that same
// statement and before any row is touched, when it differs from the
// database's clock by more than [Config.MaxClockSkew] (2 s by default). The
// store reports a [*ClockSkewError] and changes nothing; a runner whose
// first heartbeat is refused does not start. Within the bound, a lease or
// heartbeat may look up to the bound shorter to another host, far less than
// the renewal margins (a quarter lease; a heartbeat renewed every 3 s of
// its 10 s).
//
// # Schema
//
// One row per update, times in Unix milliseconds of the intake's clock,
// bodies as bytea, and partial indexes over the live rows, the settled rows
// and the unacknowledged exhaustions, so that retained completed rows cost
// the sweep nothing. The table tgrelay_schema_version records the last
// migration applied to each update table. New reads it with plain reads and
// changes the schema only when it is behind, in one transaction under an
// advisory lock; a table is either at the store's schema or New fails, so a
// store never runs at a lower capability level than it claims.
//
// # Statistics
//
// A store runs ANALYZE on its table, in the background, when the rows it
// added pass 1,000, then 10,000, and each further power of ten. PostgreSQL
// keeps a prepared statement's generic plan until the table's statistics
// change, and plans made on a young table read it whole; autovacuum
// replaces them only on its next visit, up to a minute later, by when a
// busy table has outgrown them. A role that does not own the table gets
// PostgreSQL's warning instead, and autovacuum does the work as before.
// An ANALYZE that fails (its lock timed out, the connection broke) goes to
// [Config.Logger]; serve passes its own. See analyze.go.
package pgstore
