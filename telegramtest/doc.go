// Package telegramtest is a fake Telegram Bot API server for tests,
// benchmarks and demos, in the manner of net/http/httptest: a real HTTP
// server on a loopback port that speaks the subset of the Bot API tgrelay
// uses, simulates users and chats, enforces Telegram's limits and refusals,
// injects latency and faults, and keeps a ledger of everything it accepted.
//
//	srv := telegramtest.NewServer(telegramtest.Config{})
//	t.Cleanup(srv.Close)
//	// The bot calls srv.URL + "/bot" + srv.Token + "/sendMessage" with srv.Client().
//
// # Bot API
//
// Implemented methods: getMe, sendMessage, copyMessage, forwardMessage,
// editMessageText, deleteMessage, answerCallbackQuery, sendPhoto,
// sendDocument, setWebhook, deleteWebhook, getWebhookInfo and getUpdates.
// Parameters are read from the query string and from a JSON,
// form-urlencoded or multipart/form-data body, as Telegram reads them.
// Answers use Telegram's envelope (ok, result, error_code, description,
// parameters). An unknown method is 404 "Not Found", a wrong token 401
// "Unauthorized", a body over Config.MaxRequestBytes 413.
//
// Refusals use Telegram's wording: 403 "Forbidden: bot was blocked by the
// user" ([Server.SetBlocked]), 403 "Forbidden: user is deactivated"
// ([Server.Deactivate]), 403 "Forbidden: bot was kicked from the group
// chat" ([Server.KickBot]), 400 "Bad Request: chat not found", 400 "Bad
// Request: group chat was upgraded to a supergroup chat" with
// parameters.migrate_to_chat_id ([Server.UpgradeGroup]), 400 "Bad Request:
// message is too long" (over [MaxTextLength] UTF-16 units of visible
// text), and 400 "Bad Request: can't parse entities: …" when parse_mode is
// HTML and package tghtml finds the markup invalid. Markdown parse modes
// are not checked.
//
// Differences from Telegram, on purpose: setWebhook accepts http:// URLs
// and any port (test servers are loopback), rejects max_connections outside
// 1..100 instead of clamping it, and message entities are only computed for
// a leading bot command.
//
// # Users, chats and updates
//
// Create users with [Server.NewUser] and chats with [Server.NewPrivateChat],
// [Server.NewGroup], [Server.NewSupergroup] and [Server.NewChannel]. A user
// acts with [Server.SendText], [Server.SendCommand] and
// [Server.PressButton] (a callback_query on an inline button of a message
// the bot sent); each makes an update with the next update_id.
//
// Updates wait in a bounded queue ([Config.MaxPendingUpdates]) until the
// bot takes them: through getUpdates when no webhook is set (offset
// confirms, limit 1..100, timeout capped by [Config.MaxPollTimeout], a new
// call ends an older long poll with 409), or by webhook once setWebhook
// is called (getUpdates then answers 409). Webhook delivery posts the
// update with the X-Telegram-Bot-Api-Secret-Token header, at most
// max_connections at once, one at a time per chat in update_id order, and
// re-delivers after a non-2xx answer or a timeout with doubling backoff, up
// to [WebhookConfig.MaxAttempts]; each failure sets getWebhookInfo's
// last_error_date and last_error_message. [Server.WaitIdle] waits until no
// update is pending.
//
// # Limits
//
// Sends count against a bot-wide, a per-chat and a per-group sliding
// window ([Limits]; Telegram's 30/s, 1/s and 20/min by default). A send
// over a limit is refused with 429 "Too Many Requests: retry after N" and
// parameters.retry_after, and has no effect. [Config.NowFunc] makes them
// deterministic; [Server.SetLimits] changes them while running, and
// Limits.Disabled turns them off.
//
// # Faults
//
// A [Fault] disturbs matching calls (one method or all, from the Nth
// call, a number of times): latency with jitter, a refused or reset
// connection, a hang until Close, a closed connection before or after the
// effect, a 5xx with Telegram's JSON, a proxy's 502 HTML page, a 429, a
// slow or huge answer. Arm faults with [Server.Arm] or [Config.Faults].
//
// # Ledger
//
// [Server.Messages] returns every message accepted (chat, message id,
// thread id, method, text, time) and [Server.Deliveries] every offer of an
// update to the bot, as snapshots of plain structs. [Server.Repeats] lists
// the chats that received the same text more than once and
// [Server.DuplicateDeliveries] the updates the bot may have seen twice.
//
// # Control API
//
// With Config.ControlAPI set (as `tgrelay sandbox` does), the server also
// serves a JSON API under [ControlPrefix] so that bots written in any
// language can drive it. Requests are JSON objects (at most
// [MaxControlBodyBytes]); answers are JSON, and failures are
// {"error": "..."} with status 400, 404, 409 (Config.MaxControlObjects
// reached) or 413.
//
//	GET    /_sandbox/                      {"url", "token", "bot"}
//	POST   /_sandbox/users                 {"first_name"} → user
//	POST   /_sandbox/users/block           {"user_id", "blocked": true|false}
//	POST   /_sandbox/users/deactivate      {"user_id"}
//	GET    /_sandbox/chats                 → [chat]
//	POST   /_sandbox/chats                 {"type": "private", "user_id"} or
//	                                       {"type": "group"|"supergroup", "title", "member_ids"} or
//	                                       {"type": "channel", "title"} → chat
//	POST   /_sandbox/chats/upgrade         {"chat_id"} → the new supergroup
//	POST   /_sandbox/chats/kick            {"chat_id"}
//	POST   /_sandbox/send                  {"chat_id", "user_id", "text"} → update
//	POST   /_sandbox/command               {"chat_id", "user_id", "command", "args"} → update
//	POST   /_sandbox/press                 {"chat_id", "user_id", "message_id", "data"} → update
//	GET    /_sandbox/messages[?chat_id=N]  → [message]
//	GET    /_sandbox/deliveries            → [delivery]
//	GET    /_sandbox/repeats               → [{"chat_id", "text", "count"}]
//	GET    /_sandbox/duplicate-deliveries  → [update_id]
//	GET    /_sandbox/calls                 → {"method": count}
//	POST   /_sandbox/faults                {"method", "kind", "nth", "times", "delay_ms", "jitter_ms",
//	                                        "status", "retry_after", "stall_ms", "size"}
//	DELETE /_sandbox/faults                disarm all
//	POST   /_sandbox/limits                {"disabled", "bot": {"count", "per_ms"}, "chat": {…}, "group": {…}}
//	POST   /_sandbox/reset                 forget everything but the token
//
// An update answer is {"update_id", "chat_id", "kind", "message_id",
// "callback_query_id", "filtered"}. Fault kinds are the [FaultKind] values
// ("server_error", "hang", "drop_after_effect", …).
//
// # Closing
//
// [Server.Close] ends every server-side wait, cancels webhook deliveries
// and blocks until outstanding calls finish, logging the calls it still
// waits for every 5 s. The token never appears in a log line or error.
package telegramtest
