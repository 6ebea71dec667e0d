package botapi

import "errors"

// ErrBadSecretToken reports a webhook secret token Telegram would refuse.
// It never quotes the value.
var ErrBadSecretToken = errors.New("a webhook secret token is 1-256 characters of A-Z, a-z, 0-9, _ and -")

// ValidSecretToken reports whether s is a webhook secret token Telegram
// accepts (setWebhook's secret_token): 1 to 256 characters of A-Z, a-z,
// 0-9, _ and -. It is the one home of that rule: the webhook handler, the
// webhook ownership tag, the forward's app secret and the fake Bot API all
// use it.
func ValidSecretToken(s string) bool {
	if len(s) < 1 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChar(s[i]) {
			return false
		}
	}
	return true
}
