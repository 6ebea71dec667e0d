package forward

// ParseReplies exposes the webhook-reply parser to tests: the methods and
// parameter objects of the calls, whether the body is a reply, and why it
// cannot be performed.
func ParseReplies(body []byte) (methods []string, params [][]byte, ok bool, err error) {
	calls, ok, err := parseReplies(body)
	for _, c := range calls {
		methods = append(methods, c.method)
		params = append(params, c.params)
	}
	return methods, params, ok, err
}
