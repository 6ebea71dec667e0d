// Package gateway is the outgoing half of the relay: a Bot API endpoint for
// the bot's app, in any language, that sends the app's calls to Telegram
// with Telegram's limits kept, honest outcomes, fenced sends and
// replay-safe replies. An app changes one setting, its library's API root.
//
// A [Gateway] is an [http.Handler] serving /bot<token>/<method> and
// /file/bot<token>/<path> as Telegram does, and the same logic as an
// [http.RoundTripper] for Go programs ([Gateway.RoundTripper]):
//
//	limiter, err := throttle.New(throttle.Config{})      // Telegram's limits, one per bot
//	tr, err := transport.New(transport.Config{})         // tells "never left" from "unknown"
//	gw, err := gateway.New(gateway.Config{
//		Token:     token,
//		Transport: throttle.NewTransport(limiter, tr),
//		Store:     store, // the intake's store: fencing and the reply journal
//	})
//	defer gw.Shutdown(ctx) // before the store closes: outcomes still being journaled
//	srv := &http.Server{Addr: "127.0.0.1:8081", Handler: gw, WriteTimeout: gw.Bounds().WriteTimeout}
//
// An app then uses http://127.0.0.1:8081 as its library's API root, or,
// for the calls it makes on behalf of an update, the per-attempt root the
// relay's forward announces. A Go handler run by the intake runner can skip
// HTTP: a client with Transport gw.RoundTripper() and the handler's ctx
// makes fenced, journaled calls. Package relay builds all this for you.
//
// # Outcomes
//
// Every call is answered with one of (each answer the gateway makes itself
// is Telegram-shaped, {"ok":false,"error_code":…,"description":…}, so a
// library reports it as it reports Telegram's errors):
//
//   - Telegram's answer, status and body verbatim. Telegram's own 429 is
//     waited out within MaxWait and the call retried; one whose
//     retry_after outlasts the wait is passed on as it came. An answer
//     that is not Telegram's JSON (a proxy's page, which may quote the
//     URL) is passed on with the token masked.
//   - The limiter's 429 with retry_after (Tgrelay-Outcome: throttled) when
//     the call cannot be sent within its MaxWait, at once when its turn
//     visibly comes too late. Nothing was sent.
//   - [StatusNotDispatched] (503, not-dispatched): the call never left,
//     even after Config.MaxSendTries tries. Sending it again is safe.
//   - [StatusUnknown] (502, unknown): the call may have reached Telegram
//     (the connection broke after the first byte, no answer in time, an
//     answer too large, a 5xx that is not Telegram's JSON, an error page
//     too large to read and mask). The gateway never sends it again.
//   - [StatusStale] (409, stale): see "Fencing". Nothing was sent.
//   - A refusal (refused): 401 for another bot's token; 409 for
//     getUpdates, setWebhook and deleteWebhook when Config.OwnsIntake; 400
//     for a malformed identity; 413 for a body above the bound.
//
// # Time bounds
//
// Every call is answered within [Gateway.Bounds].Answer of its arrival,
// stated on every answer in [HeaderCallTimeout] (seconds): the limiter's
// MaxWait (a minute by default; then its 429), plus Config.ResponseTimeout
// (30 s; then unknown), plus the time to journal an outcome (10 s): 100 s
// by default; a wait for an identical call in flight (see "Replay-safe
// replies") counts against the same bound. The gateway keeps that bound
// whatever its transports do. A
// server serving it must not cut a call sooner: give it a write timeout of
// [Bounds].WriteTimeout (as above; [Gateway.ServeHTTP] also sets its
// connection's write deadline). An app's HTTP timeout should exceed Answer.
//
// An app that closes its connection while its call still waits stops the
// call: nothing is sent or journaled. Once the call has left, Telegram's
// answer is read and journaled all the same, so the update's next attempt
// gets it replayed; the Observer sees it as [CallEvent].Undelivered.
//
// # Fencing
//
// A call made on behalf of an update carries its attempt's identity: the
// forward's three headers ([wire.HeaderUpdateID], [wire.HeaderAttempt],
// [wire.HeaderClaimID]) copied onto it, or the per-attempt root the forward
// announces ([wire.AttemptRoot]). It is sent only while that attempt holds its
// lease in Config.Store, checked when the call may leave (see "Replay-safe
// replies"); a stale attempt gets 409 and nothing is sent. Calls without an
// identity are only throttled and classified.
//
// One attempt goes on after its lease: the one that completed its update
// (its tail), when Config.Store is an [intake.JournalStore]. Telegraf's
// default webhook reply ends the forward's response at the handler's first
// call while the handler goes on; no other attempt of a completed update
// runs, so the tail's calls are sent, fenced and journaled like any other,
// until the update is pruned. An attempt that ended failed, abandoned or
// exhausted stays refused, as does a completed one without a journal.
//
// # The announced API root
//
// The root a forward announces in Tgrelay-Api-Root ends in "bot"
// ([wire.RootSuffix]), and the gateway reads a call under it however the app's
// library joins root and call: root + "/bot<token>/<method>" (grammY,
// aiogram, node-telegram-bot-api, go-telegram/bot, telego), root +
// "<token>/<method>" (python-telegram-bot), "./bot<token>/<method>"
// resolved against it (Telegraf), with any run of slashes read as one; the
// same for files. An app passes the header's value unchanged.
//
// # Replay-safe replies
//
// With an [intake.JournalStore], each fenced call except the read-only get*
// methods is journaled: its intent before it is sent, its outcome after,
// keyed by update id, method, a hash of its canonical parameters (key
// order and JSON, form or multipart encoding do not matter) and its
// occurrence among the attempt's identical calls. A later attempt's
// identical call gets the recorded answer with Tgrelay-Replayed: true and
// Telegram is not called; since a replay sends nothing, it does not wait
// for its chat's turn when the journal held its final outcome as its
// attempt made its first call (the earlier attempt's sends may have used
// up the chat's window). An intent without an outcome (the relay died
// between them) and an unknown outcome are answered unknown and never sent
// again; a not-dispatched outcome frees the call for a later attempt, as
// does Telegram's own 429 or 5xx (it did not act; botapi.Classify reads
// both as retryable), which the app gets as it came. A
// later attempt's identical call made while this gateway's earlier call
// is still in flight (at Telegram, or its outcome being recorded) waits
// for it, outside the limiter and within its own context, and gets what
// it ended as rather than unknown; an identical call in flight in another
// process is not seen, and reads as unknown.
//
// The intent is recorded as late as possible: with a [throttle.Transport],
// once the limiter grants the call its turn, just before it is written
// ([throttle.WithBeforeSend]), in the same step that checks the lease. A
// call that dies while it waits leaves nothing pending, so the next
// attempt sends it rather than answering it unknown. With another
// transport, the lease is checked and the intent recorded just before the
// call is handed to it. The outcome need not be durable before the answer:
// it is journaled meanwhile (in the commit of the next intent, when the
// store defers it: [intake.JournalStore.RecordOutcomeDeferred]), at most Config.MaxPendingOutcomes at once;
// [Gateway.Close] waits for them. Not-dispatched outcomes and webhook
// replies ([Gateway.Reply]) are journaled before the answer.
//
// Occurrences are counted in memory per attempt, until the attempt is
// reported over ([Gateway.AttemptEnded]) and at most Config.MaxAttempts
// attempts (least recently used forgotten), in the order the calls arrive:
// a handler that sends the same text twice makes two messages, and its
// retry replays both. A call that ends not dispatched gives its number
// back. If the
// counters are lost (a restart while an attempt runs), a deliberate second
// identical message of that attempt is replayed rather than sent; a repeat
// is never sent twice.
//
// Telegram takes one answer per query, so answerCallbackQuery,
// answerInlineQuery, answerPreCheckoutQuery and answerShippingQuery
// ([QueryAnswerMethods]) are journaled by the query they answer: the
// first answer is sent, every later one, from any attempt and with any
// parameters, is replayed; two in flight at once take turns. A refusal
// that leaves the query open (a text too long) does not count; "query is
// too old" is final.
//
// # Bodies
//
// A request body is held in memory up to Config.MaxBufferedBody. A JSON or
// form body must fit. A larger multipart body is streamed to Telegram
// through Config.StreamTransport as it arrives; its parameters hash covers
// what lies within the buffered prefix (file contents by their SHA-256),
// and a file reaching past it by its field and file name. A streamed upload
// is sent again after a not-dispatched failure only if none of it was read.
// All the calls in progress together hold at most Config.MaxBufferedTotal
// of their bodies: a call waits for its share before it reads, and one
// that gets none within its time bound is answered 503 not dispatched.
//
// # Traces
//
// With Config.TracerProvider set, every call is an OpenTelemetry server
// span, "tgrelay gateway <method>", under the W3C traceparent its request
// carries, so an app that sends back the traceparent its forward brought
// puts its calls in the update's trace; a fenced call without one goes
// where Config.TraceParentFunc says. Each try sent to Telegram is a client
// span "telegram <method>" beneath it, with Telegram's status or the
// outcome of a try that got none. Spans carry the method, outcome, status
// and whether the call was fenced or replayed: never the URL, the
// parameters or the answer. No trace context is sent to Telegram.
package gateway
