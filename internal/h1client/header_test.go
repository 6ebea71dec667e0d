package h1client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/h1client"
)

func TestCheckHeader(t *testing.T) {
	t.Parallel()
	if err := h1client.CheckHeader("X-Token", []string{"abc", "d e f"}); err != nil {
		t.Fatalf("a valid header: %v", err)
	}
	for _, tc := range []struct{ name, value string }{
		{"X-Token", "secret\r\nX-Injected: 1"},
		{"X-Token", "secret\x00"},
		{"Bad Name", "secret"},
		{"Authorization: Bearer secret", "x"},
		{"", "secret"},
	} {
		err := h1client.CheckHeader(tc.name, []string{"fine", tc.value})
		if !errors.Is(err, h1client.ErrInvalidHeader) {
			t.Errorf("CheckHeader(%q, %q) = %v; want ErrInvalidHeader", tc.name, tc.value, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("the error quotes the value or the name: %v", err)
		}
	}
}
