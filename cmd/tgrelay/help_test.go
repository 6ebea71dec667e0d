package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestHelpGolden keeps the help texts in testdata/*.golden; run with
// -update after changing them on purpose.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"help.golden", []string{"help"}},
		{"help-sandbox.golden", []string{"help", "sandbox"}},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &out); code != exitOK {
			t.Fatalf("%v: exit %d", tc.args, code)
		}
		path := filepath.Join("testdata", tc.golden)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%v output differs from %s (run go test -update if intended):\n%s", tc.args, path, out.String())
		}
	}
}
