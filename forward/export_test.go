package forward

// RetryAfterHeader exposes the Retry-After parser to tests.
var RetryAfterHeader = retryAfter

// ReplyIn exposes the webhook-reply detector to tests.
var ReplyIn = replyIn
