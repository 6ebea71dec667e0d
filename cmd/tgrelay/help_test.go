package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestHelpGolden keeps the sandbox help text in testdata/*.golden; run
// with -update after changing it on purpose. (The top-level help changes
// with every new command; TestHelpListsEveryCommand checks it instead.)
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		golden string
		args   []string
	}{
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

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &out, &out); code != exitOK {
		t.Fatalf("help: exit %d", code)
	}
	for _, c := range commands() {
		if !strings.Contains(out.String(), "\t"+c.name) || !strings.Contains(out.String(), c.summary) {
			t.Errorf("help lacks %q: %s", c.name, out.String())
		}
	}
}
