// Package sqlitestore is the embedded default store of the intake: an
// [intake.Store] with every optional capability ([intake.ProcessStore],
// [intake.ChatOrderStore], [intake.JournalStore], [intake.AdminStore] and
// [intake.HealthChecker]) on one table of an SQLite database file, through
// the pure-Go driver modernc.org/sqlite.
//
// # Durability
//
// [Open] puts the file in WAL mode with synchronous=FULL, so every commit is
// on disk before it returns and an update is durable before Telegram is
// answered. [Config.Synchronous] "NORMAL" trades that for throughput; its
// doc spells out what can be lost. A batch of adds ([Store.AddBatch]) is one
// transaction and one fsync, which is what makes the intake's group commit
// fast.
//
// A file Open creates uses incremental auto-vacuum: each [Store.Prune]
// gives the pages it freed back to the file system (up to 4,096 a prune),
// so the file follows the rows kept, not the largest backlog it ever held.
// A file made by an older version keeps its pages until one VACUUM.
//
// # Concurrency
//
// Open keeps a single writer connection (transactions begin with BEGIN
// IMMEDIATE) and a small pool of read-only connections. Every state change is
// one conditional statement, never a read followed by a write, so several
// processes can share one file: SQLite's write lock orders them, and
// busy_timeout makes them wait for each other rather than fail.
//
// Concurrent writes share transactions (group commit). Settlements share
// statements too: a transaction's settlements run as one statement, each
// row under its own conditions. Under load a settlement does not start a
// transaction of its own but waits, at most 5 ms, for the next one, which
// is then usually a batch of adds. See writes.go and settles.go.
//
// On a machine with one CPU, run Go code on two Ps: call
// runtime.GOMAXPROCS(2) at start, or set GOMAXPROCS=2, as tgrelay serve
// does by itself. The driver's writes, locks and fsyncs are blocking
// system calls, and with Go's default of one P there, nothing else runs
// while a commit waits for the disk (until the runtime's monitor takes
// the P back, up to 10 ms under load): no update joins the next batch, so
// each pays its own commits. serve on one CPU measured 3.8–4.4× the
// updates per second with two Ps (BENCHMARKS.md, relay, session 20).
//
// # Processes that die
//
// Store is an [intake.ProcessStore]: heartbeats in <table>_procs, and for
// each process registered through a Store an exclusive lock on a file in
// the directory <database file>-procs, which the kernel frees the moment
// the process dies. [Store.Reap] removes a registered process whose lock
// is free at once, so a serve restarted after kill -9 takes its
// predecessor's updates over as it starts; other processes on the file are
// judged by their heartbeats. See process.go.
//
// # Attempt history
//
// Every ended attempt ([intake.AdminStore.RecordAttempt]) is a row of
// <table>_att, with the app's masked answer, but for the attempt that
// completed its update. A settlement that carries its attempt's record
// ([intake.Settlement.Attempt]) appends it in the settlement's transaction,
// so the runner writes once per attempt; a completion keeps it in the
// update's own row instead (rec_* columns, migration 007). A completed row
// never changes again, so that record stays where it is, and the
// completion costs no history row and no index entry of one. Attempts
// lists both kinds in the order recorded. Triggers delete an update's
// history when Prune deletes its row and mark a requeue in the statement
// that requeues, so both stay one step. See attempts.go.
//
// # Fencing a domain write
//
// A handler that writes to the same database file guards that write with
// [Store.OwnsTx] inside its own BEGIN IMMEDIATE transaction, opened on
// [Store.DB]. Then a handler whose claim was lost can never commit. That
// fences a stale attempt, not a retry of the same update: for exactly-once
// effects use [Store.Once], which also records the effect in the same
// transaction. SQLite has one writer, so such a transaction delays every
// commit of the store, the webhook's included: keep it short, and read
// through [Store.ReadDB].
//
// # A database that vanishes
//
// If the database file is deleted (or its directory, or it is replaced by
// another file) while the store has it open, SQLite goes on writing into the
// unlinked file, and everything written is lost at the next restart. The
// store compares the file at its path with the one it opened (device and
// inode) before every commit and every [Config.FileCheckInterval]; while they
// differ, writes fail with [ErrDatabaseGone] (so the webhook answers 503 and
// Telegram delivers the update again), [Store.Health] and [Store.Stats] fail
// (so readiness does), and [Config.OnFileChange] says why, once, from
// whichever check noticed first. When the file is back at its path the
// store recovers by itself.
//
// [Open] creates a missing database and reports it through [Store.Created];
// with [Config.MustExist] it creates nothing, for admin tools.
//
// # Schema
//
// The table and its indexes come from embedded, numbered migrations
// (migration/NNN_name.up.sql). The table tgrelay_schema_version records
// the last step applied to each update table; Open and New read it and, only
// when it is behind, apply the missing steps in one write transaction, so
// processes opening one file at once upgrade it once. A table is either at
// the store's schema or the store fails to open. [Migrations] and [Schema]
// return the SQL for teams that apply schema changes themselves.
package sqlitestore
