package main

import (
	stdlog "log"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// What net/http writes with the standard log package (an app's
// unsolicited bytes, say) goes through serve's logger: masked. Not
// parallel: it swaps the global logger.
func TestRedirectStdLogMasksSecrets(t *testing.T) {
	const appSecret = "the-apps-own-secret-token-echoed-back"
	const token = "123456789:AAEhBOweik6ad9r_QXMENQjcrGbqCr4K-aZ"
	red := &botapi.Redactor{}
	red.Add(token, appSecret)
	buf := &testkit.SyncBuffer{}
	l, err := newLogger(buf, "json", "info", red)
	if err != nil {
		t.Fatal(err)
	}
	restore := redirectStdLog(l)
	stdlog.Printf("Unsolicited response received on idle HTTP channel starting with %q; err=%v",
		"HTTP/1.1 200 OK\r\nX-Echo: "+appSecret+"\r\nX-Token: "+token+"\r\n\r\n", nil)
	restore()
	got := buf.String()
	if !strings.Contains(got, "Unsolicited response") || !strings.Contains(got, `"level":"WARN"`) {
		t.Fatalf("the standard log's line is not in serve's log at Warn: %q", got)
	}
	_, half, _ := strings.Cut(token, ":")
	for _, s := range []string{appSecret, half} {
		if strings.Contains(got, s) {
			t.Errorf("serve's log shows a secret: %s", got)
		}
	}
	stdlog.Print("after restore")
	if strings.Contains(buf.String(), "after restore") {
		t.Errorf("the standard log still writes to serve's logger after restore")
	}
}
