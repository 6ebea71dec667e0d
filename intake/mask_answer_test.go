package intake_test

import (
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
)

// An answer that repeats a long secret (an app echoing the secret header
// it was sent, over and over) is kept masked: no piece of the secret the
// masked window's end cut in two reaches the record.
func TestMaskAnswerNeverKeepsACutSecret(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat("S3cr3t_", 36) // 252 characters, as an app's secret token may be
	red := &botapi.Redactor{}
	red.Add(secret)
	for _, lead := range []int{0, 1, 100, 251} {
		body := strings.Repeat("x", lead) + strings.Repeat(secret, 200)
		got := string(intake.MaskAnswer(red.Redact, intake.AttemptAnswer{Status: 500, Body: []byte(body)}).Body)
		if len(got) > intake.MaxAttemptBody {
			t.Fatalf("lead %d: kept %d bytes, more than %d", lead, len(got), intake.MaxAttemptBody)
		}
		if i := strings.Index(got, secret[:16]); i >= 0 {
			t.Fatalf("lead %d: the record keeps a piece of the secret at %d: ...%s", lead, i, got[max(0, i-20):])
		}
		for k := 4; k < len(secret); k++ {
			if strings.HasSuffix(got, secret[:k]) {
				t.Fatalf("lead %d: the record ends with the secret's first %d characters", lead, k)
			}
		}
	}
}
