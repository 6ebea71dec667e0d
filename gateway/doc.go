// Package gateway is the outgoing half of the relay: a Bot API endpoint for
// the bot's app, in any language, that sends the app's calls to Telegram
// with Telegram's limits kept, honest outcomes, fenced sends and
// replay-safe replies. An app changes one setting, its library's API root.
//
// A [Gateway] is an [http.Handler] serving /bot<token>/<method> and
// /file/bot<token>/<path> as Telegram does, and the same logic as an
// [http.RoundTripper] for Go programs ([Gateway.RoundTripper]).
//
// # Outcomes
//
// Every call is answered with one of:
//
//   - Telegram's answer, status and body verbatim (a Telegram error and
//     Telegram's own 429 included).
//   - The limiter's Telegram-shaped 429 with retry_after, when the call
//     could not be sent within its MaxWait (header Tgrelay-Outcome:
//     throttled): at once, with the time to its turn, when its chat's or
//     group's limit shows that its turn comes too late. Nothing was sent.
//     Telegram's own 429 whose retry_after outlasts what is left of the
//     wait is passed on as it came, and the call is not sent again.
//   - [StatusNotDispatched] (503, Tgrelay-Outcome: not-dispatched): the call
//     never left, even after Config.MaxSendTries tries. Sending it again is
//     safe.
//   - [StatusUnknown] (502, Tgrelay-Outcome: unknown): the call may have
//     reached Telegram (the connection broke after the first byte, no
//     answer came in time, the answer was too large, or a 5xx came that is
//     not Telegram's JSON). The gateway never sends it again.
//   - [StatusStale] (409, Tgrelay-Outcome: stale): see fencing. Nothing
//     was sent.
//   - A refusal (Tgrelay-Outcome: refused): 401 for another bot's token,
//     409 for getUpdates, setWebhook and deleteWebhook while the relay owns
//     the bot's updates (Config.OwnsIntake), 400 for a malformed identity,
//     413 for a body above the bound. Nothing was sent.
//
// Every answer the gateway makes itself is Telegram-shaped
// ({"ok":false,"error_code":…,"description":…}), so an app's library
// reports it as it reports Telegram's errors.
//
// # Time bounds
//
// Every call is answered within one bound, from the arrival of its
// request ([Gateway.Bounds], stated on every answer of the handler in
// [HeaderCallTimeout], in seconds):
//
//	MaxWait           the limiter's Config.MaxWait (a minute by default): the
//	                  longest the call waits for its turn, Telegram's 429
//	                  pauses and retries included; then the limiter's 429
//	+ ResponseTimeout Config.ResponseTimeout (30 s by default): the longest
//	                  Telegram may take to answer once the call has its turn;
//	                  then unknown (502)
//	+ OutcomeTimeout  journaling an outcome that precedes the answer (10 s)
//	= Answer          100 s by default
//
// The gateway keeps it itself: a call's context ends MaxWait +
// ResponseTimeout after its arrival, whatever its transports do, and the
// limiter grants no turn after MaxWait (it refuses the call with a 429
// instead). A server serving the gateway must not cut a call sooner: its
// write timeout must be at least [Bounds].WriteTimeout (Answer plus
// [AnswerWriteMargin]); the relay builds its gateway server with it, and
// [Gateway.ServeHTTP] also sets its connection's write deadline to it. An
// app's HTTP timeout toward the gateway should exceed Answer: an app that
// gives up sooner may leave a call that is then sent (see below). A file
// download or a large answer must end within the same bound.
//
// # The app's connection
//
// An app that closes its connection (its HTTP client gave up) while its
// call waits (for its turn, or between tries that never left) stops the
// call: it is not sent, nothing is journaled as sent, and a later
// attempt's identical call is sent. Once the call has left, the app's going
// does not stop it: Telegram's answer is read and journaled as if the app
// were there, so the update's next attempt gets it replayed rather than
// sending the message again. The Observer reports an answer the app did
// not get as undelivered ([CallEvent].Undelivered).
//
// # Fencing
//
// A call made on behalf of an update carries its attempt's identity: the
// three headers the forward posts each update with ([HeaderUpdateID],
// [HeaderAttempt], [HeaderClaimID]) copied onto the call, or the
// per-attempt API root the forward announces ([AttemptRoot]: the gateway's
// address followed by /a/<update>/<attempt>/<claim>/bot), handed to the
// app's library as its API root for that update (see "The announced API
// root"). The call is sent only while
// that attempt holds its lease in Config.Store; an attempt whose lease
// expired, or whose update was claimed again or settled, gets 409 and
// nothing is sent. The lease is checked when the call may leave: once the
// limiter granted it its turn (see "When the intent is recorded"), so an
// attempt that lost its lease while its call waited is refused then.
// Calls without an identity are only throttled and classified.
//
// One attempt goes on after its lease: the one that completed its update
// (its tail), when Config.Store is an [intake.JournalStore]. A framework
// may end the forward's response early (Telegraf's default webhook reply
// answers the first call as the response and lets the handler go on), so
// the relay completes the update while the handler still makes calls. No
// other attempt of a completed update runs, so those calls are sent,
// fenced and journaled like any other, until the update's row is pruned
// (see "Who may call" at [intake.JournalStore]). An attempt that ended
// failed, abandoned or exhausted stays refused: another attempt may run.
// Without a journal a completed attempt is refused too, since its calls
// could not be replayed.
//
// # The announced API root
//
// The root a forward announces in Tgrelay-Api-Root ends in the segment
// "bot" ([RootSuffix]), and the gateway reads a call under it however the
// app's library joined root and call: root + "/bot<token>/<method>"
// (grammY, aiogram, node-telegram-bot-api, go-telegram/bot, telego),
// root + "<token>/<method>" (python-telegram-bot's base_url), or the URL
// "./bot<token>/<method>" resolved against the root (Telegraf, which drops
// the root's last segment), and the same for /file/bot<token>/<path>.
// Runs of slashes count as one, so a root given a trailing slash by hand
// works too. An app therefore passes the header's value unchanged; the
// table of what each library takes is at forward.HeaderAPIRoot.
//
// # Replay-safe replies
//
// When the store is an [intake.JournalStore], each fenced call (except the
// read-only get* methods) is journaled before it is sent (the intent) and
// after (the outcome), keyed by update id, method, a hash of its canonical
// parameters (see params.go: key order and JSON, form or multipart encoding
// do not matter) and its occurrence among identical calls of the attempt.
// The intent is recorded only while the attempt holds its lease, in the
// same step that checks it. A later attempt of the same update that makes
// the same call gets the recorded answer with Tgrelay-Replayed: true, and
// Telegram is not called. An intent without outcome (the relay died
// between them) and an unknown outcome are answered unknown and never sent
// again. A not-dispatched outcome frees the call: a later attempt sends it.
//
// # One answer per query
//
// Telegram takes one answer per callback, inline, pre-checkout or shipping
// query. So answerCallbackQuery, answerInlineQuery, answerPreCheckoutQuery
// and answerShippingQuery ([QueryAnswerMethods]) are journaled keyed by the
// query they answer (its id parameter), not by their parameters: the first
// answer an update makes to a query is sent, and every later one, from any
// attempt and with any parameters (another text, ok:true after the relay's
// own decline), is answered from the journal with Tgrelay-Replayed: true.
// Two answers to one query in flight at once take turns, so the second
// reads the first's outcome. An answer Telegram refused with a 400 that
// leaves the query open (a text too long) is journaled not dispatched, so
// the next answer is sent; its refusal that the query is gone ("query is
// too old…") is final and replayed. An answer whose query id cannot be
// read is journaled by its parameters, as any call, and Telegram refuses
// it.
//
// # When the intent is recorded
//
// An intent stands for a call that may have reached Telegram, so it is
// recorded as late as possible: when Config.Transport (or StreamTransport)
// is a [throttle.Transport], from the function the gateway hands it with
// [throttle.WithBeforeSend], which runs once the limiter has granted the
// call its turn and just before the request is written to the connection.
// A call waits for its turn up to the limiter's MaxWait (see "Time
// bounds"); if the relay dies meanwhile, nothing is pending, and the next
// attempt's identical call is sent rather than answered unknown. A call
// that gives up waiting (MaxWait, its context ended) records nothing. A
// call refused at its turn (stale: 409; journaled already: replayed or
// unknown; the store failing: 503) is not sent, and the limiter does not
// count it. A try that did not leave (a failed connect) journals its entry
// not dispatched before it is tried again, so its next intent is recorded
// at its next turn too. The occurrence is still taken when the call
// arrives, so identical calls of an attempt are numbered in the order they
// were made, however long they wait. With any other transport (one that
// does not report RunsBeforeSend), the lease is checked and the intent
// recorded just before the call is handed to it, so the wait in such a
// transport, if any, is covered by the intent.
//
// Only the intent must be durable before the send; the app gets Telegram's
// answer as soon as it arrives, and the outcome is journaled meanwhile
// (with a store whose writes share commits, such as sqlitestore, it rides
// in the commit of the next intent rather than costing one of its own; see
// [intake.JournalStore.RecordOutcomeDeferred]). If the relay dies before it commits, the entry
// stays an intent without outcome: answered unknown, never sent again, as
// a crash between the send and the outcome always was. A later attempt's
// identical call that arrives while that outcome is still being written
// waits for it, and is replayed. Config.MaxPendingOutcomes bounds the
// outcomes in flight (beyond it, an outcome is journaled before the
// answer; a negative value journals every one before it), and
// [Gateway.Shutdown] waits for them; call it before closing the store.
// Not-dispatched outcomes and webhook replies ([Gateway.Reply]) are always
// journaled before the answer.
//
// Occurrences are counted in memory per attempt (Config.MaxAttempts
// attempts at most, least recently used forgotten): a handler that sends
// the same text twice makes two messages, and its retry's two identical
// calls replay both. A call that ends not dispatched gives its number back,
// so an app repeating it within the attempt does not shift the numbering
// its next attempt sees. If the counters are lost (a restart of the relay
// while an attempt still runs), the attempt's calls count from 1 again and
// are answered from the journal: a repeat is never sent twice, though a
// deliberate second identical message of that attempt is then replayed
// rather than sent.
//
// # Bodies
//
// A request body is held in memory up to Config.MaxBufferedBody. A JSON or
// form body must fit. A multipart body that does not fit is streamed to
// Telegram through Config.StreamTransport as it arrives, never held whole;
// its parameters hash covers the fields and files that lie wholly within
// the buffered prefix (file contents by their SHA-256), and a file reaching
// past it by its field and file name. A streamed upload is sent again after
// a not-dispatched failure only when none of it had been read.
package gateway
