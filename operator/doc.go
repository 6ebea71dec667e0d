// Package operator posts product events meant for people (new users,
// payments, errors) into an operator chat, without ever getting in the way of
// the code that posts them.
//
// A [Channel] is the opposite of a journal: [Channel.Post] returns at once
// and never panics, the queue is bounded and drops its oldest message when
// the chat cannot keep up, and every message that will not arrive is reported
// to [Config.OnDrop] with a [DropReason]. Sends are paced below Telegram's
// per-chat limit (the pace is remembered across idle periods), one at a time,
// into forum topics when configured. A send that provably never left
// (not dispatched), Telegram's 429 (after its retry_after) and Telegram's own
// 5xx are retried; anything else is dropped with its [botapi.Failure].
//
// Text is masked on the way in (the bot token's shape, configured patterns
// and exact secret values), so drops are reported masked too, and cut to
// Telegram's 4096 UTF-16 units on the way out (HTML through package tghtml,
// which also sanitises it).
//
// A [Dedupe] window keeps one alert from being sent more than once per
// window and caps how many a window admits; the counts of what it held are
// always reported, on the next message or in a summary message.
package operator
