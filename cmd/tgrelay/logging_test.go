package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
)

func TestLoggerRedactsEverywhere(t *testing.T) {
	t.Parallel()
	const token = "7012345678:AAH-realistic_Token-Value-abcdefghijk"
	const secret = "My_Webhook-Secret-42"
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			red := &botapi.Redactor{}
			red.Add(token, secret)
			log, err := newLogger(&buf, format, "debug", red)
			if err != nil {
				t.Fatal(err)
			}
			apiURL := "https://api.telegram.org/bot" + token + "/getMe"
			log.Info("calling "+apiURL+" with secret "+secret, "url", apiURL)
			log.Warn("failed", "err", fmt.Errorf("post %s: %w", apiURL, errors.New("boom")))
			log.With("secret", secret).WithGroup("g").Debug("grouped", "escaped", url.QueryEscape(token), "bytes", []byte(secret))
			log.Error("struct", "v", struct{ Token string }{token})
			log.Info("someone else's token", "t", "123456789:ABCdefGHIjklMNOpqrSTUvwxYZ123456789")
			out := buf.String()
			for _, s := range []string{token, strings.SplitN(token, ":", 2)[1], url.QueryEscape(token), secret, "ABCdefGHIjklMNOpqrSTUvwxYZ123456789"} {
				if strings.Contains(out, s) {
					t.Errorf("log output contains %q:\n%s", s, out)
				}
			}
			if !strings.Contains(out, "7012345678:[redacted]") && !strings.Contains(out, "[redacted]") {
				t.Errorf("nothing was masked:\n%s", out)
			}
			if strings.Count(out, "\n") != 5 {
				t.Errorf("want 5 lines, got:\n%s", out)
			}
		})
	}
}
