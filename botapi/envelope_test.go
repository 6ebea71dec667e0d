package botapi_test

import (
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
)

// TestCallJSONWithoutOKIsNotTelegrams: a 5xx whose JSON body lacks
// Telegram's boolean "ok" (a load balancer's or proxy's JSON error) is not
// Telegram's own 5xx: its outcome is unknown and it is not retryable.
func TestCallJSONWithoutOKIsNotTelegrams(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{}`, `{"message":"Bad gateway"}`, `{"description":"upstream timed out","error_code":502}`, `{"ok":"false"}`, `{"ok":null}`} {
		for _, status := range []int{500, 502, 503, 504} {
			ae := botapi.ParseAnswer("sendMessage", status, []byte(body))
			if ae == nil || !ae.NotJSON {
				t.Errorf("%d %s: ParseAnswer = %+v, want NotJSON", status, body, ae)
				continue
			}
			if f := botapi.Classify(ae); f.Reason != botapi.ReasonUnknown || f.Retryable {
				t.Errorf("%d %s: Classify = %+v, want unknown, not retryable", status, body, f)
			}
		}
	}
	// Telegram's own envelope keeps its meaning.
	ae := botapi.ParseAnswer("sendMessage", 502, []byte(`{"ok":false,"error_code":502,"description":"Bad Gateway"}`))
	if f := botapi.Classify(ae); ae == nil || ae.NotJSON || f.Reason != botapi.ReasonServerError || !f.Retryable {
		t.Errorf("Telegram's 502: %+v, %+v", ae, f)
	}
}
