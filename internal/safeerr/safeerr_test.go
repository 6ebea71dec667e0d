package safeerr_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/safeerr"
)

func TestUnquoted(t *testing.T) {
	quoted := fmt.Errorf(`net/http: malformed HTTP status code "POST /bot123:secret/sendMessage"`)
	got := safeerr.Unquoted(quoted)
	if strings.Contains(got.Error(), "secret") || !strings.Contains(got.Error(), "malformed HTTP status code") {
		t.Errorf("Unquoted(%q) = %q, want the text before the quote alone", quoted, got)
	}
	if errors.Unwrap(got) != nil {
		t.Errorf("the cut error unwraps to %v, which quotes the answer", errors.Unwrap(got))
	}
	plain := fmt.Errorf("reading: %w", io.ErrUnexpectedEOF)
	if got := safeerr.Unquoted(plain); got != plain || !errors.Is(got, io.ErrUnexpectedEOF) {
		t.Errorf("Unquoted(%v) = %v, want it unchanged", plain, got)
	}
}

func ExampleUnquoted() {
	err := errors.New(`net/http: malformed HTTP response "HTTP/1.1 407 user:pass"`)
	fmt.Println(safeerr.Unquoted(err))
	// Output: net/http: malformed HTTP response (the answer's bytes are not quoted)
}

func TestProxyRefused(t *testing.T) {
	if got, want := safeerr.ProxyRefused(407).Error(), "proxy refused CONNECT: 407 Proxy Authentication Required"; got != want {
		t.Errorf("ProxyRefused(407) = %q, want %q", got, want)
	}
}
