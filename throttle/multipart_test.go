package throttle_test

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/throttle"
)

// An upload streams through the transport: the app's body stops after the
// first 128 KiB of the file until the server has read chat_id, and goes on
// with 32 MiB more only then. A transport that buffered the body before
// sending it would never send it, and the test would fail at its bound.
func TestTransportStreamsMultipart(t *testing.T) {
	t.Parallel()
	const head, rest = 128 << 10, 32 << 20
	sawChat := make(chan string, 1)
	type upload struct {
		chat string
		size int64
		err  error
	}
	got := make(chan upload, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u upload
		defer func() { got <- u }()
		mr, err := r.MultipartReader()
		if err != nil {
			u.err = err
			http.Error(w, err.Error(), 400)
			return
		}
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				u.err = err
				http.Error(w, err.Error(), 400)
				return
			}
			switch p.FormName() {
			case "chat_id":
				v, _ := io.ReadAll(p)
				u.chat = string(v)
				sawChat <- u.chat
			case "document":
				u.size, u.err = io.Copy(io.Discard, p)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"result":{"message_id":1}}`)
	}))
	t.Cleanup(srv.Close)

	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		mw.WriteField("chat_id", "-1001234")
		fw, _ := mw.CreateFormFile("document", "big.bin")
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
		for range head / len(chunk) {
			if _, err := fw.Write(chunk); err != nil {
				return
			}
		}
		select {
		case <-sawChat:
		case <-time.After(20 * time.Second):
			pw.CloseWithError(errors.New("the server never saw chat_id: the transport held the body back"))
			return
		}
		for range rest / len(chunk) {
			if _, err := fw.Write(chunk); err != nil {
				return
			}
		}
		mw.Close()
		pw.Close()
	}()

	var obs observed
	l := newLimiter(t, throttle.Config{Observer: throttle.Observer{EventFunc: obs.observe}})
	client := &http.Client{Transport: throttle.NewTransport(l, nil)}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/bot1:x/sendDocument", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	resp.Body.Close()
	u := <-got
	if u.err != nil || resp.StatusCode != 200 {
		t.Fatalf("upload: %d, server: %v", resp.StatusCode, u.err)
	}
	if u.chat != "-1001234" || u.size != head+rest {
		t.Fatalf("server got chat %q and %d bytes, want -1001234 and %d", u.chat, u.size, head+rest)
	}
	// The call counted against the group it named.
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.events) != 1 || obs.events[0].Kind != throttle.EventGranted || obs.events[0].ChatID != -1001234 || obs.events[0].Method != "sendDocument" {
		t.Fatalf("events %+v, want one grant for chat -1001234", obs.events)
	}
}
