package relay

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

// An observer's events carry no secret in their error's text, and the
// error still unwraps to its cause.
func TestEmitMasksSecretsInEventErrors(t *testing.T) {
	t.Parallel()
	const token = "123456:AAH-observer-secret-token-value"
	var got []Event
	r := &Relay{red: &botapi.Redactor{}, now: time.Now, log: slog.New(slog.DiscardHandler),
		observers: []func(Event){func(e Event) { got = append(got, e) }}}
	r.red.Add(token)
	cause := fmt.Errorf("post https://api.telegram.org/bot%s/sendMessage: %w", token, fs.ErrClosed)
	plain := errors.New("app answered 500")
	r.emit(Event{Kind: KindFailed, Err: cause})
	r.emit(Event{Kind: KindFailed, Err: plain})
	if len(got) != 2 {
		t.Fatalf("observer saw %d events, want 2", len(got))
	}
	if text := got[0].Err.Error(); strings.Contains(text, "observer-secret") || !strings.Contains(text, "123456:") {
		t.Errorf("event error %q: want the token masked, its bot id kept", text)
	}
	if !errors.Is(got[0].Err, fs.ErrClosed) {
		t.Errorf("event error %v no longer wraps its cause", got[0].Err)
	}
	if got[1].Err != plain {
		t.Errorf("an error without a secret became %#v; want it passed as it is", got[1].Err)
	}
}
