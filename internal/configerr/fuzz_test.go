package configerr_test

import (
	"errors"
	"testing"

	"github.com/tgrelay/tgrelay/internal/configerr"
)

// FuzzURLRules: whatever a URL setting holds, the rules refuse it with
// their own fixed text, so nothing of it is quoted, and a URL they accept
// has what they promise.
func FuzzURLRules(f *testing.F) {
	for _, s := range []string{
		"https://api.telegram.org", "http://127.0.0.1:8081/root/", "https://bot:hunter2@c.example/",
		"https://c.example/?q#f", "http://[::1]:80", "http://bot:hunter2@bad host/", "ftp://x", "", "%zz", "http://%41:%42@h/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := configerr.HTTPURL(raw)
		switch {
		case err != nil:
			if err != configerr.ErrNotHTTPURL || u != nil {
				t.Fatalf("HTTPURL(%q) = %v, %v", raw, u, err)
			}
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			t.Fatalf("HTTPURL(%q) accepted %v", raw, u)
		default:
			if cerr := configerr.URLCredential(u, "elsewhere"); (cerr != nil) != (u.User != nil) ||
				cerr != nil && (!errors.Is(cerr, configerr.ErrURLCredential) || cerr.Error() != configerr.ErrURLCredential.Error()+"; elsewhere") {
				t.Fatalf("URLCredential(%q) = %v", raw, cerr)
			}
		}
		b, err := configerr.BaseURL(raw)
		switch {
		case err != nil:
			if err != configerr.ErrNotBaseURL || b != nil {
				t.Fatalf("BaseURL(%q) = %v, %v", raw, b, err)
			}
		case u == nil:
			t.Fatalf("BaseURL(%q) accepted what HTTPURL refused", raw)
		case b.User != nil || b.RawQuery != "" || b.Fragment != "":
			t.Fatalf("BaseURL(%q) accepted %v", raw, b)
		}
	})
}
