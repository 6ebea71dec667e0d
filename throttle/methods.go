package throttle

import (
	"slices"
	"strings"
)

// counted lists the Bot API methods that count against the limits, by
// lower-case name (the Bot API matches method names without regard to
// case). Keep the package doc's table in step with it.
var counted = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range CountedMethods() {
		m[strings.ToLower(name)] = true
	}
	return m
}()

// CountedMethods returns the Bot API methods that count against the limits:
// the ones that post a message to a chat or change one, that is the
// send*, copy*, forward* and edit* families and the media methods (the
// package doc's table). Every other method (getMe, getUpdates,
// answerCallbackQuery, answerInlineQuery, sendChatAction, deleteMessage,
// getFile, setWebhook, …) passes without waiting. The slice is a fresh
// copy, sorted.
func CountedMethods() []string {
	ms := []string{
		// Posting a message.
		"sendMessage", "sendPhoto", "sendAudio", "sendDocument", "sendVideo",
		"sendAnimation", "sendVoice", "sendVideoNote", "sendPaidMedia",
		"sendMediaGroup", "sendLocation", "sendVenue", "sendContact",
		"sendPoll", "sendChecklist", "sendDice", "sendSticker", "sendInvoice",
		"sendGame",
		// Copying and forwarding.
		"copyMessage", "copyMessages", "forwardMessage", "forwardMessages",
		// Editing.
		"editMessageText", "editMessageCaption", "editMessageMedia",
		"editMessageLiveLocation", "stopMessageLiveLocation",
		"editMessageReplyMarkup", "editMessageChecklist", "stopPoll",
	}
	slices.Sort(ms)
	return ms
}

// Counts reports whether method counts against the limits (see
// [CountedMethods]); case does not matter.
func Counts(method string) bool {
	if len(method) > 64 {
		return false
	}
	return counted[strings.ToLower(method)]
}
