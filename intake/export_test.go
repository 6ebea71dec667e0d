package intake

// LineKey exposes the chat line key of a body to the tests.
func LineKey(body []byte) string {
	p, err := parseUpdate(body)
	if err != nil {
		return ""
	}
	return p.line
}
