// Package botapi makes one Telegram Bot API call and says honestly what
// became of it.
//
// A [Client] posts a method's parameters (JSON, or multipart/form-data
// streamed through a pipe when a parameter is an [InputFile]) and returns
// Telegram's raw result. A refusal is an [*APIError] carrying Telegram's code,
// description, retry_after and migrate_to_chat_id. A failure on the way is a
// [*RequestError] whose message is redacted and whose cause chain still
// reaches context errors and the transport's not-dispatched error.
//
// [Classify] turns any error into a [Failure]: a [Reason], whether repeating
// the same send could work ([Failure.Retryable]), whether the recipient should
// no longer be addressed ([Failure.RecipientUnreachable]), and the
// [Evidence] the verdict rests on. Only three things are retryable: a request
// that was provably not dispatched, Telegram's 429, and Telegram's own 5xx.
// Anything Classify does not recognise is [ReasonUnknown]: never retried,
// never taken as proof that a recipient is gone.
//
// No error, message or panic from this package contains the bot token;
// [Redact] and [Client.Redact] mask it in text that comes from elsewhere.
package botapi
