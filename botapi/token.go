package botapi

// MaxBotIDDigits bounds the bot id, the part of a bot token before its
// colon.
const MaxBotIDDigits = 20

// ValidToken reports whether token has the shape of a bot token as
// BotFather gives it: the bot's numeric id (1 to [MaxBotIDDigits] digits),
// a colon, and a secret of one or more of A-Z a-z 0-9 _ -, at most
// [MaxTokenBytes] in all. Such a token can stand in a URL path unescaped.
//
// It is the module's one token rule: [New] refuses a token that fails it
// with [ErrInvalidToken], and the tgrelay command and package telegramtest
// check it too. It does not tell whether Telegram knows the token; getMe
// does. The masking of tokens in text ([Redact]) looks for a narrower
// shape, long enough not to mask ordinary text such as "12:30".
func ValidToken(token string) bool {
	if len(token) > MaxTokenBytes {
		return false
	}
	i := 0
	for i < len(token) && token[i] >= '0' && token[i] <= '9' {
		i++
	}
	if i == 0 || i > MaxBotIDDigits || i == len(token) || token[i] != ':' {
		return false
	}
	secret := token[i+1:]
	if secret == "" {
		return false
	}
	for j := 0; j < len(secret); j++ {
		if !tokenChar(secret[j]) {
			return false
		}
	}
	return true
}

// tokenChar reports whether c is one of A-Z, a-z, 0-9, _ and -: the
// characters of a token's secret half and of a webhook's secret_token.
func tokenChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
