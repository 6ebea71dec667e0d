package telegramtest

import "time"

// SetWebhookError sets what getWebhookInfo reports as the webhook's last
// delivery error: last_error_date at and last_error_message msg, worded as
// Telegram words its failures ("Connection refused", "SSL error {...}",
// "Wrong response from the webhook: 403 Forbidden", ...). It lets a test
// show a client an error the server cannot produce on loopback, such as a
// name that does not resolve. An empty msg clears both fields. A later
// failed delivery replaces them, as at Telegram.
func (s *Server) SetWebhookError(at time.Time, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.st.webhook
	if msg == "" {
		w.lastErrorDate, w.lastErrorMsg = 0, ""
		return
	}
	w.lastErrorDate, w.lastErrorMsg = at.Unix(), msg
}
