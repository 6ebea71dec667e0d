package hookowner_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/hookowner"
)

// FuzzTaggedURL checks that a tagged address carries the secret's owner tag
// and only it: tagging again changes nothing, its host is the one the
// untagged address had, and no part of the address's query was dropped.
func FuzzTaggedURL(f *testing.F) {
	for _, s := range []string{
		addr, addr + "?owner=0123456789abcdef", addr + "?owner=a&owner=b", "http://h:8443/p?x=1#frag",
		"https://user:pass@h/p", "https://h/p;owner=x", "https://h/p?a=1;b=2", "https://h/p?x=%zz&y=1", "https://h/%6Fwner", "https://h/p?%6Fwner=x", "https://[::1]:443/",
	} {
		f.Add(s)
	}
	tag, err := hookowner.OwnerTag(secret)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tagged, err := hookowner.TaggedURL(raw, secret)
		if err != nil {
			return
		}
		if got := hookowner.OwnerTagOf(tagged); got != tag {
			t.Fatalf("TaggedURL(%q) = %q: owner tag %q, want %q", raw, tagged, got, tag)
		}
		if u, err := url.Parse(raw); err == nil {
			if _, err := url.ParseQuery(u.RawQuery); err != nil {
				t.Fatalf("TaggedURL(%q) = %q: a query that does not parse (%v) lost what did not", raw, tagged, err)
			}
		}
		if again, err := hookowner.TaggedURL(tagged, secret); err != nil || again != tagged {
			t.Fatalf("TaggedURL(TaggedURL(%q)) = %q, %v; want %q unchanged", raw, again, err, tagged)
		}
		if got, want := hookowner.HostOf(tagged), hookowner.HostOf(raw); got != want {
			t.Fatalf("host of TaggedURL(%q) = %q; the address had %q", raw, got, want)
		}
		if strings.Contains(tagged, secret) && !strings.Contains(raw, secret) {
			t.Fatalf("TaggedURL(%q) = %q carries the secret", raw, tagged)
		}
	})
}

// FuzzHostOf checks that the owner host read from a registered address,
// which errors and the dashboard show, never carries a path, a query, a
// fragment or credentials.
func FuzzHostOf(f *testing.F) {
	for _, s := range []string{
		"", addr, "https://user:pass@h/p", "https://h?secret", "https://h#frag", "//h/p", "h/p", "https://h%2Fp/",
		"https://a@b@c/", "https://h\\x/", "https://[::1%25eth0]/", "https://h:99999/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		host := hookowner.HostOf(raw)
		if strings.ContainsAny(host, "/?#@\\ \t\r\n") {
			t.Fatalf("HostOf(%q) = %q: more than a host", raw, host)
		}
	})
}
