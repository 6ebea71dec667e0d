package throttle

import (
	"hash/fnv"
	"strings"
)

// usernameBase is the top of the range of keys for "@username" chats, far
// below any numeric chat id Telegram issues (they fit in 52 bits), so a
// username key never collides with a real id.
const usernameBase = -(int64(1) << 60)

// UsernameKey returns the chat key [Limiter.Wait] takes for a chat named
// by "@username" (a public channel or supergroup, so the key is negative
// and the per-group limit applies). The name is compared without case, as
// Telegram does. The same chat addressed by its numeric id has another key:
// the limiter cannot know they are one chat.
func UsernameKey(username string) int64 {
	h := fnv.New64a()
	h.Write([]byte(strings.ToLower(strings.TrimPrefix(username, "@"))))
	return usernameBase - int64(h.Sum64()>>4)
}
