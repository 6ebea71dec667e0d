// Package throttle keeps a bot's sends within Telegram's limits: one
// [Limiter] per bot token, shared by every sender of the process (the
// gateway, broadcast, the operator channel, the app's own library through
// [Transport]), so they all spend one budget.
//
//	l, err := throttle.New(throttle.Config{}) // Telegram's limits
//	client := &http.Client{Transport: throttle.NewTransport(l, nil)}
//	// hand client to any Bot API library (go-telegram/bot, telego, botapi)
//
// # Limits
//
// Telegram's published limits are the defaults, each a [Limit] of Count
// sends in any window of Per (a sliding window, as Telegram counts):
//
//	Config.Bot    30 per second across all chats ("about 30 messages per second")
//	Config.Paid   1000 per second instead of Bot, for calls with allow_paid_broadcast: true
//	Config.Chat   5 per 5 seconds in one chat: 1/s on average, with a short burst of 5
//	Config.Group  20 per minute in one group, supergroup or channel (chat id < 0), on top of Chat
//
// Bot and Paid calls are also spaced evenly, Per/Count apart on average
// (at most two at once): a burst of 30 in one instant is not what
// Telegram means by 30 per second, and a quiet chat's reply then never
// waits a whole window for the bot-wide budget.
//
// Telegram says a chat may see "short bursts" over one message per second
// but not how many; the default allows five in any five seconds, the rule
// telegramtest keeps (so does the sandbox). A server that allows none answers the
// second message of a burst with 429, which the limiter absorbs (see "429"
// below); set Config.Chat to {1, time.Second} to never try.
//
// # Which methods count
//
// Only calls that post or change a message count ([Counts],
// [CountedMethods]); everything else passes at once:
//
//	counted   sendMessage sendPhoto sendAudio sendDocument sendVideo sendAnimation
//	          sendVoice sendVideoNote sendPaidMedia sendMediaGroup sendLocation
//	          sendVenue sendContact sendPoll sendChecklist sendDice sendSticker
//	          sendInvoice sendGame
//	          copyMessage copyMessages forwardMessage forwardMessages
//	          editMessageText editMessageCaption editMessageMedia
//	          editMessageLiveLocation stopMessageLiveLocation
//	          editMessageReplyMarkup editMessageChecklist stopPoll
//	not       getMe getUpdates answerCallbackQuery answerInlineQuery
//	          sendChatAction deleteMessage getFile setWebhook and every other method
//
// A call counts once (sendMediaGroup and copyMessages too, though Telegram
// may count each message of an album). A counted call with no chat_id (an
// inline message's edit) counts against Bot only.
//
// # Fairness and order
//
// A call waits in its chat's queue. Calls to one chat are granted in the
// order they asked, one at a time: the next waits until the previous one
// is finished (answered), so even a 429 and its retry cannot reorder a
// chat's messages. Across chats, whenever the bot-wide budget has room,
// the limiter grants the chat whose last grant is the oldest among the
// chats that may go (a chat it has no record of counts as granted one chat
// interval before its call asked). A group that floods is held by its own
// limit and is always "just served", so a private chat's reply goes ahead
// of it: its wait is its own limit's, plus the bot-wide budget's when that
// is exhausted. Nobody starves: every grant to another chat makes that
// chat's key newer than the waiting one's.
//
// # Counting
//
// Telegram counts a send when it arrives, which is some time between the
// grant and the answer. The limiter counts it from the answer (when the
// [Permit] is finished): then two sends can never look closer together to
// Telegram than the limiter allowed, whatever the network's jitter. The
// price is one round trip per window slot: at 100 ms per call, 30 per
// second becomes about 27. A permit never finished counts as sent
// Config.MaxHold after its grant, so a lost caller cannot block its chat
// for good.
//
// # 429
//
// A 429 from Telegram means Telegram did not act, so the call can be sent
// again: it is not counted, and [Permit.Retry] (which [Transport] uses)
// puts it back at the head of its chat's queue. Telegram does not say which
// limit a 429 is about. The limiter pauses the chat of the refused call
// for retry_after, always: that is certainly enough for a chat's or a
// group's limit. It pauses the whole bot for retry_after when a second
// chat is refused while the first chat's pause runs (two chats refused
// means the limit is the bot's, most likely another process spending the
// same token), and when the refused call names no chat. Calls that cannot
// outwait a pause within their MaxWait are refused at once.
//
// # Waiting is bounded
//
// A call waits at most Config.MaxWait, or until the sooner deadline a
// caller put in its context with [WithWaitDeadline], 429 pauses and
// retries included (a sooner context deadline ends it sooner, with the
// context's error); Config.MaxQueue calls may wait at once. A call that
// cannot be granted by then gets a [*WaitError] with a RetryAfter, in
// whole seconds: at once, with the time until its chat's or group's limit
// has room, when the sends already answered show that its turn cannot come
// in time (the 21st message to a group within a minute, its turn 40 s
// away, with 10 s to wait); else when its wait ends, with the limiter's
// estimate of when it could go. The sends still in flight are not counted
// for the refusal at once (one may yet be refused by Telegram and free its
// slot), so a call that waiting would have let through is never refused. Through
// [Transport], a call whose context ends while it waits fails with an error
// that reports NotDispatched() true: it was never sent, so a caller that
// records outcomes (the gateway's journal) does not count it as unknown.
//
// # Transport
//
// [Transport] reads the method from the URL path (/bot<token>/<method>),
// and chat_id and allow_paid_broadcast from the query and from a JSON,
// form or multipart body. A body up to [MaxPeekBytes] is read whole before
// it is sent; of a larger multipart body only the parts up to chat_id are
// read (within MaxPeekBytes; put chat_id before the files, as libraries
// do), and the rest streams to Telegram as it comes, so an upload is never
// buffered whole. Telegram's 429 is retried within MaxWait when the body
// can be sent again: a body the transport read whole (every call without a
// large file), or any body when the request has GetBody (http.NewRequest
// sets it for bytes and strings readers). Otherwise Telegram's 429 goes back as it came (and
// the pause still applies to the next call). A call that cannot be sent
// within MaxWait is answered, without reaching Telegram, with
//
//	429 {"ok":false,"error_code":429,"description":"Too Many Requests: retry after N","parameters":{"retry_after":N}}
//
// and the header Tgrelay-Outcome: throttled, which every Telegram library
// already handles. The URL carries the bot token, so no error of this
// package contains a URL.
//
// A caller that must do something only once a call is about to leave (the
// gateway checks the attempt's lease and journals the call's intent) puts a
// function in the request's context with [WithBeforeSend]: the transport
// runs it after the grant and before Base (and before each resend after
// Telegram's 429), and a refusal there cancels the permit (the call does
// not count) and returns a [*BeforeSendError]. A call that waits and gives
// up never runs it.
//
// # Observing
//
// Config.Observer's EventFunc receives an [Event] per granted call (with its wait),
// per 429 from Telegram (with what was paused) and per refusal.
package throttle
