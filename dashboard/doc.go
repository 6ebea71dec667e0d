// Package dashboard is the web UI of a relay: an [http.Handler] for serve's
// admin listener that shows the relay's state and lets an operator repair
// it.
//
// # Pages
//
//   - Overview: a health verdict with its reason (the store answers and
//     can record, the app completes forwards, the failure rate of the last
//     five minutes, the oldest pending update's age, exhaustions waiting,
//     webhook ownership, the processes' heartbeats; the thresholds are
//     [OldestPendingWarn] and its neighbours); accepted/s, forwarded/s,
//     completed, retried and exhausted over the last hour as small SVG
//     charts (from a [Recorder], a bounded ring in this process: the page
//     says so, and they start empty after a restart), the backlog by
//     state, leases lost, the webhook's owner and last check, the store in
//     use, and the gateway's sends by outcome and 429 pauses once the
//     gateway reports any.
//   - Updates: the store's rows, newest first, by state and by chat, page
//     by page, and a search by update id, chat or body text (with an
//     [intake.AdminStore]; oldest first on request). The text search
//     refuses a text containing a secret, and matches a body as it is
//     shown, secrets masked, so it never finds a piece of one. A
//     pending update held by an earlier unsettled update of its chat says
//     "held behind update N". An update's page shows its formatted body
//     with secrets masked, its attempts, identity, last error and
//     journaled replies (an interrupted one reads unknown, not pending).
//   - Exhaustions: the unacknowledged exhaustions with Acknowledge and
//     Requeue buttons. Each acts with the exact identity (update id,
//     attempt, claim id) shown on the page, after a confirmation step; an
//     identity that is no longer current is refused with 409 and says what
//     changed, because someone else acted first. Acknowledge all and
//     Requeue all (and Requeue on a filtered Updates page) go through a
//     confirmation that lists the rows, names their count and posts their
//     identities; only those rows, and only at those identities, are
//     changed (at most [MaxBulk] at once).
//   - Replies: the reply journal across updates, newest first, filtered by
//     outcome (unknown, and interrupted pending ones, by default), method,
//     chat and time, each outcome explained with what the operator can do.
//   - Processes: the serve processes and their heartbeats, the rows each
//     holds, the processing rows no live process holds (and what happens
//     to them), and the updates that crashed their process.
//   - Broadcasts: every broadcast journal in a configured directory, with a
//     progress bar, the sent, failed, uncertain and unreachable counts,
//     whether a runner holds its lock, a running one's rate and ETA
//     (measured by this handler over the last minute it watched), and the
//     recipients to check by hand.
//
// Pages are rendered on the server with html/template; the one stylesheet
// and the small script are embedded. The script only refreshes open pages
// (on a server-sent event, or by polling when the bounded number of event
// streams is taken); every page works with scripts off. Counting the
// store's rows by state reads the whole table, so the pages share one
// count and reuse it for ten times what it took to take (at least a
// second, at most five minutes): however many tabs are open and however
// big the table, the dashboard counts a tenth of the time at most. Past
// the first count a page never waits for one: it shows the latest while
// the next is taken, and says when the counts it shows were taken if that
// was longer ago than its refresh. The handler's own writes, and a failing
// health check, drop the count, so the next page counts anew.
//
// # Safety
//
// Without [Config.AdminToken] the handler answers only requests that
// arrived on a loopback address and name a loopback host (which also
// defeats DNS rebinding); [CheckExposure] tells a relay to refuse to start
// on any other address. With a token, a sign-in form starts a session the
// handler keeps (its cookie carries a random id and a MAC, never the
// token), and signing out ends it on the server. Wrong tokens, at the form
// or as a bearer header, are logged and limited per client address (the
// forwarded one behind [Config.TrustedProxies], whose X-Forwarded-Proto
// also makes the cookies Secure). [Handler.Protect] puts the listener's
// other endpoints (a relay's /metrics) behind the same door.
// State-changing requests are POSTs carrying a CSRF token bound to a
// SameSite=Strict cookie, checked for a cross-origin source too (a plain-HTTP
// page at a non-loopback address posts with "Origin: null", which passes
// only with that token); [Config.ReadOnly] hides the buttons and refuses
// them. Every response
// carries a strict Content-Security-Policy (no inline script or style). The
// bot token, the webhook secret ([Config.Secrets]) and the admin token are
// masked in every page and never logged. Page sizes, the rendered body of
// an update, a page's total size and the number of event streams are
// bounded.
package dashboard
