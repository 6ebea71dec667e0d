package botapi_test

import (
	"errors"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
)

func TestCheckWebhookURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want error // nil: accepted; errOther: some other error
	}{
		{"https://bot.example.com/hook", nil},
		{"https://bot.example.com:443/hook", nil},
		{"https://bot.example.com:8443/hook", nil},
		{"https://bot.example.com:88/", nil},
		{"https://203.0.113.7:80/hook", nil},
		{"https://[2001:db8::1]:8443/hook", nil},
		{"http://bot.example.com/hook", botapi.ErrWebhookNotHTTPS},
		{"https://bot.example.com:8080/hook", botapi.ErrWebhookPort},
		{"https://127.0.0.1:40123/hook", botapi.ErrWebhookPort},
		{"/hook", errOther},
		{"https:///hook", errOther},
	} {
		t.Run(tc.url, func(t *testing.T) {
			err := botapi.CheckWebhookURL(tc.url)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == errOther && err == nil:
				t.Fatal("accepted")
			case tc.want != nil && tc.want != errOther && !errors.Is(err, tc.want):
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

var errOther = errors.New("other")
