package gateway_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// TestStreamedUploadAnswerCutIsUnknown: an upload above MaxBufferedBody
// goes through the stream transport, which hands the gateway Telegram's
// answer unread; when that answer breaks off mid-body (the upload
// arrived), the call is unknown, not "never left", and the update's next
// attempt does not upload the document again.
func TestStreamedUploadAnswerCutIsUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	cut := func(b []byte) []byte {
		return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b[:len(b)/2])
	}
	// The gateway's Telegram is a proxy that delivers each call to f.tg,
	// then cuts the answer.
	base, err := transport.New(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Token: f.tg.Token, APIRoot: deliveringProxy(t, f.tg, cut, false), Store: f.store,
		Transport: throttle.NewTransport(f.lim, base), StreamTransport: throttle.NewTransport(f.lim, gateway.NewStreamTransport()),
		MaxBufferedBody: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("chat_id", fmt.Sprint(f.chat.ID))
	fw, _ := mw.CreateFormFile("document", "big.bin")
	fw.Write(bytes.Repeat([]byte{'x'}, 200<<10))
	mw.Close()
	upload := func(id intake.Identity) reply {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, attemptRoot(srv.URL, id)+"/bot"+f.tg.Token+"/sendDocument", bytes.NewReader(body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", mw.FormDataContentType())
		return do(t, req)
	}
	first := f.claim(t, 35)
	if r := upload(first); r.status != gateway.StatusUnknown || r.header.Get(wire.HeaderOutcome) != string(wire.OutcomeUnknown) {
		t.Fatalf("attempt 1's upload = %d %s (outcome %q); want 502 unknown", r.status, r.body, r.header.Get(wire.HeaderOutcome))
	}
	second := retryAttempt(t, f.store, first)
	if r := upload(second); r.header.Get(gateway.HeaderReplayed) != "true" || r.status != gateway.StatusUnknown {
		t.Errorf("attempt 2's upload = %d %s (replayed %q); want unknown, replayed", r.status, r.body, r.header.Get(gateway.HeaderReplayed))
	}
	if n := f.tg.Calls()["sendDocument"]; n != 1 {
		t.Errorf("Telegram got sendDocument %d times; want once", n)
	}
}
