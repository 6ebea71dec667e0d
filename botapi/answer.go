package botapi

// ParseAnswer reads a Bot API answer as any library received it (the
// method, the HTTP status and the whole body) and returns Telegram's
// refusal as an [*APIError], or nil when the answer is a success. An answer
// that is not Telegram's JSON envelope gives an APIError with NotJSON set.
// The description is passed through [Redact]. It lets code that sees the
// raw exchange (a func installed with transport.WithResultFunc) classify a
// refusal with [Classify] whatever error type the library made of it.
func ParseAnswer(method string, status int, body []byte) *APIError {
	_, err := parseResponse(method, status, body, Redact)
	ae, _ := err.(*APIError)
	return ae
}
