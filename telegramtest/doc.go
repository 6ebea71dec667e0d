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
// Implemented methods: getMe, sendMessage, sendPhoto, sendDocument,
// sendVideo, sendAudio, sendVoice, sendAnimation, sendSticker,
// sendMediaGroup, sendLocation, sendVenue, sendContact, sendDice,
// sendPoll, copyMessage, forwardMessage, editMessageText,
// editMessageCaption, editMessageReplyMarkup, deleteMessage,
// deleteMessages, answerCallbackQuery, answerInlineQuery, sendInvoice,
// answerPreCheckoutQuery, sendChatAction,
// setMessageReaction, pinChatMessage, unpinChatMessage,
// unpinAllChatMessages, getChat, getChatMember, getChatMemberCount,
// getChatAdministrators, getUserProfilePhotos, getFile (and the download path
// /file/bot<token>/<file_path>), setMyCommands, getMyCommands,
// deleteMyCommands, setChatMenuButton, getChatMenuButton, getMyName,
// setMyName, getMyDescription, setMyDescription, getMyShortDescription,
// setMyShortDescription, getMyDefaultAdministratorRights, setWebhook,
// deleteWebhook, getWebhookInfo and getUpdates. Parameters are read from
// the query string and from a JSON, form-urlencoded or multipart/form-data
// body, as Telegram reads them. Answers use Telegram's envelope (ok,
// result, error_code, description, parameters). A method the fake does not
// implement is 404 with a description that says so (not a bare "Not
// Found", which reads like a wrong token), a wrong token 401
// "Unauthorized", a body over Config.MaxRequestBytes 413.
//
// Results are shaped like Telegram's. A text or caption sent with
// parse_mode HTML, MarkdownV2 or Markdown comes back as plain text with
// entities (caption_entities for media); without parse_mode the entities
// parameter is echoed, and Telegram's own entities (bot commands,
// mentions, hashtags, URLs) are found. A reply (reply_to_message_id or
// reply_parameters) carries reply_to_message; an inline keyboard is kept
// in the sent message while a reply keyboard, its removal or a force reply
// is not echoed (the ledger records the markup as sent either way). getMe
// has the fields current framework types require.
//
// An empty optional field is absent, as Telegram reads it: "", false, 0,
// null, [] or an object whose fields are all empty (go-telegram/bot's
// "copy_text":{"text":""} in every inline button, "parse_mode":"",
// "reply_parameters":{}, "reply_markup":{}). Where Telegram gives an empty
// value a meaning, it keeps it: "callback_game":{} is a game button,
// "request_poll":{} asks for any poll, and "switch_inline_query":"" is a
// button's action when no other field is used. An empty reply_markup
// (including {"inline_keyboard":[]}) is no markup, so an edit with one
// removes the keyboard; reply_parameters that is empty or names message 0
// is no reply; parse_mode "None" is no parse mode.
//
// Refusals use Telegram's wording: 403 "Forbidden: bot was blocked by the
// user" ([Server.SetBlocked]), 403 "Forbidden: user is deactivated"
// ([Server.Deactivate]), 403 "Forbidden: bot was kicked from the group
// chat" ([Server.KickBot]), 400 "Bad Request: chat not found", 400 "Bad
// Request: group chat was upgraded to a supergroup chat" with
// parameters.migrate_to_chat_id ([Server.UpgradeGroup]), 400 "Bad Request:
// message is too long" (over [MaxTextLength] UTF-16 units of visible
// text), 400 "Bad Request: message to be replied not found", 400 "Bad
// Request: can't parse entities: …" for invalid HTML or MarkdownV2 (an
// unescaped reserved character, an entity left open) with Telegram's
// description, "can't parse inline keyboard button: Text buttons are
// unallowed in the inline keyboard", "message is not modified: …",
// "BOT_COMMAND_INVALID", "REACTION_INVALID", "wrong parameter action in
// request" and the other checks of each method.
//
// Differences from Telegram, on purpose: an inline keyboard button that
// uses two optional fields (say a url and a callback_data, both non-empty)
// or a reply keyboard button that uses two (request_contact and
// request_location) is refused, "only one of the optional fields must be
// used", as the Bot API documentation requires, where Telegram silently
// takes the first in its own order; setWebhook accepts http:// URLs
// and any port (test servers are loopback), and deliveries trust any
// certificate, unless [WebhookConfig.Strict] asks for Telegram's rules
// (https to ports 443, 80, 88 and 8443 only, the certificate verified
// against given roots or the one uploaded with setWebhook, failures
// reported in Telegram's words); it rejects max_connections outside
// 1..100 instead of clamping it; a file named by URL is not downloaded (its
// download path answers 404), and inline messages cannot be edited.
//
// # Users, chats and updates
//
// Create users with [Server.NewUser] and chats with [Server.NewPrivateChat],
// [Server.NewGroup], [Server.NewSupergroup] and [Server.NewChannel]. A user
// acts with [Server.SendText], [Server.Send] (a text, photo, document or
// location, optionally replying to a message), [Server.SendCommand],
// [Server.EditText] (an edited_message), [Server.PressButton] (a
// callback_query on an inline button of a message the bot sent) and
// [Server.InlineQuery] (an inline_query) and [Server.Pay] (a
// pre_checkout_query for an invoice the bot sent with sendInvoice); each
// makes an update with the next update_id.
//
// # Deadlines and payments
//
// Queries keep Telegram's deadlines ([Config.Deadlines]: by default 15 s
// for a callback query, 10 s for an inline query and for a pre-checkout
// query, on [Config.NowFunc]'s clock from the moment the user acted). An
// answer after its query's deadline, and a second answer to a query, is
// refused with 400 "Bad Request: query is too old and response timeout
// expired or query ID is invalid". A payment succeeds only when the bot
// answers its pre_checkout_query ok:true in time: the bot then receives a
// message with successful_payment (telegram_payment_charge_id,
// provider_payment_charge_id, total_amount, currency, invoice_payload).
// Declined or unanswered in time, the payment fails and the bot receives
// nothing more. [Server.QueryOutcomes] tells, per query, whether it was
// answered, is waiting or expired, and how many late or repeated answers
// were refused; [Server.Payments] tells which payments succeeded or failed
// and why. An unanswered query turns expired when its deadline passes,
// without any call: these reads and [Server.WaitPayment] see it at once.
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
// update is pending; [Server.WaitSettled] also waits for calls in flight
// and for the retry_after of every 429 answered, so a bot's retries are
// covered; [Server.WaitMessages] waits until a chat has received n
// messages. All three wake on the server's own signals, never by polling.
//
// # Limits
//
// Sends count against a bot-wide, a per-chat and a per-group sliding
// window ([Limits]; by default Telegram's 30/s per bot, one per second
// per chat with bursts of 5, and 20/min per group). A send
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
// slow or huge answer, or an outage ([FaultUnreachable]: the port closed
// and idle connections dropped, so a client's request provably never left
// it: *not dispatched*). Arm faults with [Server.Arm] or [Config.Faults].
//
// # Ledger
//
// [Server.Messages] returns every message accepted (chat, message id,
// thread id, method, plain text, entities, the message replied to, the
// reply markup as sent, time), [Server.CallbackAnswers] every
// answerCallbackQuery, [Server.InlineAnswers] every answerInlineQuery,
// [Server.QueryOutcomes] and [Server.Payments] (see above) and
// [Server.Deliveries] every offer of an update to the bot, as snapshots of
// plain structs. [Server.Repeats] lists
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
//	POST   /_sandbox/send                  {"chat_id", "user_id", "text", "reply_to",
//	                                        "photo"|"document": {"name", "data" (base64)},
//	                                        "location": {"latitude", "longitude"}} → update
//	POST   /_sandbox/edit                  {"chat_id", "user_id", "message_id", "text"} → update
//	POST   /_sandbox/command               {"chat_id", "user_id", "command", "args"} → update
//	POST   /_sandbox/press                 {"chat_id", "user_id", "message_id", "data"} → update
//	POST   /_sandbox/inline                {"user_id", "query"} → update
//	POST   /_sandbox/pay                   {"chat_id", "user_id", "message_id"} (an invoice) → update
//	GET    /_sandbox/queries               → [query outcome]
//	GET    /_sandbox/payments              → [payment]
//	GET    /_sandbox/messages[?chat_id=N]  → [message]
//	GET    /_sandbox/callback-answers      → [callback answer]
//	GET    /_sandbox/inline-answers        → [inline answer]
//	POST   /_sandbox/wait/messages         {"chat_id", "count", "timeout_ms"} → [message], or 408
//	POST   /_sandbox/wait/settled          {"timeout_ms"} → true, or 408
//	GET    /_sandbox/deliveries            → [delivery]
//	GET    /_sandbox/repeats               → [{"chat_id", "text", "count"}]
//	GET    /_sandbox/duplicate-deliveries  → [update_id]
//	GET    /_sandbox/calls                 → {"method": count}
//	POST   /_sandbox/faults                {"method", "kind", "nth", "times", "delay_ms", "jitter_ms",
//	                                        "status", "retry_after", "stall_ms", "size", "duration_ms"}
//	DELETE /_sandbox/faults                disarm all
//	POST   /_sandbox/limits                {"disabled", "bot": {"count", "per_ms"}, "chat": {…}, "group": {…}}
//	POST   /_sandbox/reset                 forget everything but the token
//
// An update answer is {"update_id", "chat_id", "kind", "message_id",
// "callback_query_id", "inline_query_id", "pre_checkout_query_id",
// "filtered"}. Fault kinds are the [FaultKind] values
// ("server_error", "hang", "drop_after_effect", …).
//
// # Closing
//
// [Server.Close] ends every server-side wait, cancels webhook deliveries
// and blocks until outstanding calls finish, logging the calls it still
// waits for every 5 s. The token never appears in a log line or error.
package telegramtest
