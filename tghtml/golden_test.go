package tghtml

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestSplitGolden splits each testdata/split/*.html at the limit in its name
// (name.<limit>.html) and compares the parts, one per block separated by a
// line "----", with the matching .golden file.
func TestSplitGolden(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob(filepath.Join("testdata", "split", "*.html"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no golden inputs in testdata/split")
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			t.Parallel()
			base := strings.TrimSuffix(in, ".html")
			limit, err := strconv.Atoi(filepath.Ext(base)[1:])
			if err != nil {
				t.Fatalf("name %s must end in .<limit>.html", in)
			}
			markup, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			parts, err := Split(string(markup), limit)
			if err != nil {
				t.Fatal(err)
			}
			checkParts(t, string(markup), limit, parts)
			got := strings.Join(parts, "\n----\n") + "\n"
			golden := base + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("Split(%s, %d) differs from %s:\n got:\n%s\nwant:\n%s", in, limit, golden, got, want)
			}
		})
	}
}
