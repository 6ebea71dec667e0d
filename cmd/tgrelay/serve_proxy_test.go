package main

import (
	"net/netip"
	"slices"
	"testing"
)

// --admin-trusted-proxy takes addresses and CIDR prefixes, comma-separated,
// and refuses anything else.
func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	got, err := parsePrefixes(" 10.1.2.3/8, 127.0.0.1,::1 ,")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	if !slices.Equal(got, want) {
		t.Errorf("parsePrefixes = %v, want %v", got, want)
	}
	for _, bad := range []string{"nope", "10.0.0.0/99", "proxy.example"} {
		if _, err := parsePrefixes(bad); err == nil {
			t.Errorf("parsePrefixes(%q) accepted", bad)
		}
	}
}
