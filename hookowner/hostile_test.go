package hookowner_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/hookowner"
)

// TestMalformedWebhookInfoIsNoVerdict: getWebhookInfo answers ok but
// without Telegram's webhook info (no result, null, an object without its
// "url", a url that is not a string). That says nothing about who owns the
// webhook: it must not read as "no webhook", which would let a claim that
// takes over from a polling bot (TakeoverFrom "none") replace another
// deployment's webhook, a check report it gone, or a delete report success.
func TestMalformedWebhookInfoIsNoVerdict(t *testing.T) {
	t.Parallel()
	for name, result := range map[string]string{
		"no result":  `{"ok":true}`,
		"null":       `{"ok":true,"result":null}`,
		"empty":      `{"ok":true,"result":{}}`,
		"url null":   `{"ok":true,"result":{"url":null,"pending_update_count":0}}`,
		"url number": `{"ok":true,"result":{"url":5}}`,
		"array":      `{"ok":true,"result":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var set []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch {
				case strings.HasSuffix(r.URL.Path, "/getWebhookInfo"):
					fmt.Fprint(w, result)
				default:
					set = append(set, r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
					fmt.Fprint(w, `{"ok":true,"result":true}`)
				}
			}))
			t.Cleanup(srv.Close)
			c, err := botapi.New(realishToken, botapi.Config{APIRoot: srv.URL, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := hookowner.Claim(t.Context(), c, hookowner.ClaimConfig{URL: addr, Secret: secret, TakeoverFrom: hookowner.HostNone}); err == nil {
				t.Errorf("Claim = %+v; want an error: Telegram's answer showed no webhook info", res)
			}
			if st, err := hookowner.Check(t.Context(), c, addr, secret); err == nil {
				t.Errorf("Check = %+v; want an error", st)
			}
			if err := hookowner.Delete(t.Context(), c, secret, ""); err == nil {
				t.Error("Delete = nil; want an error")
			}
			if len(set) != 0 {
				t.Errorf("calls made after the malformed getWebhookInfo: %v; want none", set)
			}
		})
	}
}

const realishToken = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"

// TestSetWebhookRefusalNeverQuotesTheSecret: setWebhook is refused with a
// description that echoes the secret_token it was sent. Claim's error,
// which the relay returns from Start and a command prints, must not carry
// the webhook secret.
func TestSetWebhookRefusalNeverQuotesTheSecret(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/getWebhookInfo") {
			fmt.Fprint(w, `{"ok":true,"result":{"url":"","pending_update_count":0}}`)
			return
		}
		fmt.Fprintf(w, `{"ok":false,"error_code":400,"description":"Bad Request: secret token %s is not allowed"}`, secret)
	}))
	t.Cleanup(srv.Close)
	c, err := botapi.New(realishToken, botapi.Config{APIRoot: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = hookowner.Claim(t.Context(), c, hookowner.ClaimConfig{URL: addr, Secret: secret, TakeoverFrom: hookowner.HostNone})
	if err == nil {
		t.Fatal("Claim succeeded")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("Claim's error quotes the webhook secret: %v", err)
	}
	var ae *botapi.APIError
	if !errors.As(err, &ae) || ae.Code != 400 {
		t.Errorf("Claim's error = %v; want Telegram's 400 reachable with errors.As", err)
	}
}
