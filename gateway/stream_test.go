package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
)

// TestMultipartStreamsThrough: an upload far larger than MaxBufferedBody
// reaches Telegram while the app is still writing it: the gateway never
// holds it whole. The app withholds its last chunk until the upstream has
// read most of the upload; a gateway that buffered the body would wait for
// that chunk forever.
func TestMultipartStreamsThrough(t *testing.T) {
	const (
		buffered = 64 << 10
		chunk    = 256 << 10
		chunks   = 16 // 4 MiB
	)
	readEnough := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int64
		buf := make([]byte, 32<<10)
		signalled := false
		for {
			k, err := r.Body.Read(buf)
			n += int64(k)
			if !signalled && n > (chunks-1)*chunk {
				close(readEnough)
				signalled = true
			}
			if err != nil {
				break
			}
		}
		fmt.Fprintf(w, `{"ok":true,"result":{"read":%d}}`, n)
	}))
	t.Cleanup(upstream.Close)
	gw, err := gateway.New(gateway.Config{Token: "1:tok", APIRoot: upstream.URL, Transport: http.DefaultTransport,
		StreamTransport: gateway.NewStreamTransport(), MaxBufferedBody: buffered})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)

	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("chat_id", "42")
		fw, _ := mw.CreateFormFile("document", "big.bin")
		block := bytes.Repeat([]byte{'x'}, chunk)
		for i := range chunks {
			if i == chunks-1 {
				select {
				case <-readEnough:
				case <-time.After(20 * time.Second):
					pw.CloseWithError(fmt.Errorf("the upstream never saw the upload's start: the gateway buffers it"))
					return
				}
			}
			if _, err := fw.Write(block); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/bot1:tok/sendDocument", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	r := do(t, req)
	if r.status != 200 || !strings.Contains(string(r.body), `"read":`) {
		t.Fatalf("upload = %d %s", r.status, r.body)
	}
	select {
	case <-readEnough:
	default:
		t.Fatal("the upstream did not read the upload")
	}
}

// TestLargeUploadReachesTelegram: a multipart sendDocument above the buffer
// bound goes through the limiter and the stream transport to telegramtest,
// fenced and journaled like any call.
func TestLargeUploadReachesTelegram(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.MaxBufferedBody = 32 << 10 }})
	id := f.claim(t, 9)
	body := &bytes.Buffer{}
	mw := multipart.NewWriter(body)
	_ = mw.WriteField("chat_id", itoa(f.chat.ID))
	_ = mw.WriteField("caption", "big file")
	fw, _ := mw.CreateFormFile("document", "big.bin")
	fw.Write(bytes.Repeat([]byte("0123456789"), 300<<10/10))
	mw.Close()
	send := func(id string, attempt int) reply {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost,
			f.srv.URL+"/a/9/"+itoa(int64(attempt))+"/"+id+"/bot"+f.tg.Token+"/sendDocument", bytes.NewReader(body.Bytes()))
		req.Header.Set("Content-Type", mw.FormDataContentType())
		return do(t, req)
	}
	r := send(id.ClaimID, id.Attempt)
	if r.status != 200 || !r.env.OK {
		t.Fatalf("upload = %d %s", r.status, r.body)
	}
	f.fail(t, id)
	again := f.reclaim(t, 9)
	if r2 := send(again.ClaimID, again.Attempt); r2.header.Get(gateway.HeaderReplayed) != "true" || !bytes.Equal(r2.body, r.body) {
		t.Errorf("the retried upload = %d %s; want the first answer replayed", r2.status, r2.body)
	}
	if n := f.ledger("big file"); n != 1 {
		t.Errorf("ledger holds %d documents; want 1", n)
	}
}
