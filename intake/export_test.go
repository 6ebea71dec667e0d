package intake

// LineKey exposes the chat line key of a body to the tests.
func LineKey(body []byte) string {
	p, err := parseUpdate(body)
	if err != nil {
		return ""
	}
	return p.line
}

// ChatOf exposes the chat an update's body belongs to.
func ChatOf(body []byte) (int64, string) {
	p, err := parseUpdate(body)
	if err != nil {
		return 0, ""
	}
	return p.chatID, p.chatType
}

// MaskAnswer exposes the masking of an app's answer for its record.
var MaskAnswer = maskAnswer
