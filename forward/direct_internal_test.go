package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Only plain http endpoints take the direct path; two on one address share
// their connections.
func TestDirectTargetIsForPlainHTTP(t *testing.T) {
	t.Parallel()
	pools := map[string]*directPool{}
	target := func(raw string) *directTarget {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return newDirectTarget(u, pools)
	}
	for _, raw := range []string{"https://127.0.0.1:8443/hook", "http://[fe80::1%25eth0]:8080/hook"} {
		if d := target(raw); d != nil {
			t.Fatalf("%s took the direct path", raw)
		}
	}
	a, b, c := target("http://127.0.0.1:8080/update"), target("http://127.0.0.1:8080/exhausted?k=v"), target("http://app/hook")
	if a == nil || b == nil || c == nil {
		t.Fatal("a plain http endpoint kept the net/http path")
	}
	if a.pool != b.pool || a.pool == c.pool {
		t.Fatalf("pools: one address shares one, another has its own")
	}
	if b.uri != "/exhausted?k=v" || c.uri != "/hook" || c.pool.addr != "app:80" || c.host != "app" {
		t.Fatalf("targets %+v and %+v", b, c)
	}
}

// FuzzDirectAnswer: whatever an endpoint answers, the direct path returns
// an answer or an error without hanging or panicking, reads no more than
// it may, and keeps the connection only after an answer that ended
// cleanly with nothing after it.
func FuzzDirectAnswer(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"HTTP/1.1 302 Found\r\nLocation: http://x/\r\nContent-Length: 0\r\n\r\n",
		"garbage", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		ours, peer := net.Pipe()
		defer peer.Close()
		go func() {
			// Take the request, answer, and end the connection.
			go io.Copy(io.Discard, peer)
			peer.Write(answer)
			peer.Close()
		}()
		p := newDirectPool("", 1, time.Hour)
		defer p.CloseIdle()
		p.put(newDirectConn(ours))
		d := &directTarget{pool: p, host: "app", uri: "/hook"}
		resp, err := d.do(context.Background(), 5*time.Second, http.Header{"Content-Type": {"application/json"}}, []byte(`{}`))
		if err != nil {
			return
		}
		if !bytes.HasPrefix(answer, []byte("HTTP/")) {
			t.Fatalf("an answer from %q", answer)
		}
		if _, err := readAnswer(resp); err != nil && resp.StatusCode < 300 {
			t.Logf("body: %v", err)
		}
		resp.Body.Close()
		for _, dc := range p.Idle() {
			if n := dc.br.Buffered(); n > 0 {
				t.Fatalf("kept a connection with %d bytes nobody asked for", n)
			}
		}
	})
}

// shortBody yields its bytes, then the error a cut-short answer ends with.
type shortBody struct{ r *strings.Reader }

func (b shortBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (shortBody) Close() error { return nil }

// An app that declares an answer near the bound and sends a little of it
// holds what it sent, not what it declared; what arrived, and why it
// stopped, are still reported.
func TestReadAnswerDoesNotBelieveALargeDeclaredLength(t *testing.T) {
	sent := strings.Repeat("a", 100)
	read := func() {
		resp := &http.Response{ContentLength: DefaultMaxResponseBytes - 1, Body: shortBody{strings.NewReader(sent)}}
		b, err := readAnswer(resp)
		if string(b) != sent || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("readAnswer = %q, %v; want the %d bytes sent and io.ErrUnexpectedEOF", b, err, len(sent))
		}
	}
	read()
	const calls = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		read()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > 8<<10 {
		t.Fatalf("readAnswer allocated %d bytes a call for %d bytes sent", per, len(sent))
	}

	resp := &http.Response{ContentLength: 0, Body: shortBody{strings.NewReader("")}}
	if b, err := readAnswer(resp); b != nil || err != nil {
		t.Fatalf("readAnswer of an empty answer = %q, %v; want nil, nil", b, err)
	}
}
