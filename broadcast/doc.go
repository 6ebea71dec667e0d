// Package broadcast sends one message to many Telegram chats at the Bot
// API's rate limit, resumable by name after any crash, and never sends a
// recipient the message twice unless the journal records it uncertain, and
// never resends an uncertain recipient automatically.
//
// A broadcast is a function with an end, [Run], not a resource. It keeps its
// state in Config.Dir/Config.Name/:
//
//   - audience.json, the snapshot of the recipients and the message's
//     fingerprint (Config.Fingerprint): computed once, validated and
//     de-duplicated, written atomically (a private temp file, fsync, a hard
//     link that never replaces, a directory fsync) and used by every later
//     run, which must carry the same fingerprint ([ErrMessageChanged]);
//   - journal.ndjson, an append-only journal with an intent line before a
//     recipient's first send, an outcome line after it (delivered,
//     unreachable, failed, uncertain), and a released line when a halted or
//     stopped recipient goes back to pending; each line is durable before the
//     step that depends on it and carries a CRC-32C checksum. The journal is
//     created before the snapshot, so a snapshot without a journal is
//     damage;
//   - journal.mark, the length the journal's durable lines have reached, so
//     a journal cut short is noticed;
//   - lock, an exclusive kernel lock (flock) that dies with its holder and is
//     never reclaimed by age; it is checked before every send and every
//     journal write.
//
// # Sending
//
// Up to Config.Concurrency sends are in flight at once, under one token
// bucket of Config.Rate sends per second, so the rate is reached even when
// each request takes 100 ms ([WindowFor] sizes the window from an observed
// latency). A recipient takes its place in the window in audience order,
// waits for a token, writes its intent and sends; its outcome is written
// after it leaves the window, so journal fsyncs never hold a place idle.
// Concurrent journal lines share one write and one fsync (group commit),
// and each line is still durable before the step that depends on it. A
// failed send is classified into a [Verdict]
// (by default with [Classify], built on botapi.Classify): retry after
// Telegram's wait (pausing every sender), retry with a capped doubling
// backoff, record the recipient unreachable or failed, halt with the
// recipient pending (a refused message), resend once to a migrated chat, or
// record it uncertain and halt (an outcome nobody can know). Halting or
// stopping starts no new send, waits for the sends in flight and records
// their outcomes.
//
// [Sender] builds the usual SendFunc: a text (sendMessage, optionally HTML
// checked with package tghtml) or a copy of a prepared message
// (copyMessage) through a botapi.Client.
//
// On a machine with one CPU, run Go code on two Ps (GOMAXPROCS=2, or
// runtime.GOMAXPROCS(2) at start), as tgrelay broadcast run does by
// itself: the journal's fsync is a blocking system call, and with one P
// nothing else runs while it waits. At a rate of 1,000 on one CPU, one P
// reached a median of 0.90 of it and two 0.99 (bench broadcast-cli).
//
// # Damage
//
// A torn last line (a crash in the middle of an append) is expected: it is
// cut off, and its recipient keeps the state of its earlier lines (an
// intent without outcome becomes uncertain). Any other damage (a line that
// fails its checksum, a journal shorter than its mark, a missing journal or
// mark) means nobody knows which recipients the lost lines were about, so
// [Run] refuses to resume with a [*DamageError] and [Inspect] reports it.
// Config.RepairUncertain is the operator's explicit way on: every recipient
// without an outcome in the intact lines is recorded uncertain, never sent
// again.
//
// # Inspecting
//
// [Inspect] reads a broadcast's snapshot and journal without its lock and
// without writing, so it may run beside a runner: the counts a dry run
// gives, whether a runner holds the lock, and the uncertain, failed,
// unreachable and migrated recipients by name, for the operator to check.
package broadcast
