package h1client_test

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/h1client"
)

func TestLimit(t *testing.T) {
	t.Parallel()
	l := &h1client.Limit{R: strings.NewReader("abcdef"), Remaining: 4}
	got, err := io.ReadAll(l)
	if string(got) != "abcd" || !errors.Is(err, h1client.ErrLimit) || !l.Hit {
		t.Fatalf("read %q, %v, hit %v; want abcd, ErrLimit, true", got, err, l.Hit)
	}
	l = &h1client.Limit{R: strings.NewReader("ab"), Remaining: 4}
	if got, err := io.ReadAll(l); string(got) != "ab" || err != nil || l.Hit {
		t.Fatalf("under the budget: %q, %v, hit %v", got, err, l.Hit)
	}
}

func TestReadHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, answer string
		status       int
		err          error
	}{
		{"final answer", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, nil},
		{"interim answers skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", 204, nil},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\n\r\n", 0, h1client.ErrSwitchingProtocols},
		{"endless interim answers", strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", h1client.MaxInterim+1) + "HTTP/1.1 200 OK\r\n\r\n", 0, h1client.ErrTooManyInterim},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := h1client.ReadHead(bufio.NewReader(strings.NewReader(tc.answer)), nil)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ReadHead = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("ReadHead = %v, %v; want status %d", resp, err, tc.status)
			}
		})
	}
}
