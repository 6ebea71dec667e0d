package forward

// RetryAfterHeader exposes the Retry-After parser to tests.
var RetryAfterHeader = retryAfter
