package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestUnknownEnvWarnsWithTheClosestName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		environ []string
		want    []string // lines, in order
	}{
		{name: "known names are silent", environ: []string{"TGRELAY_TOKEN=1:x", "TGRELAY_WEBHOOK_SECRET=s", "TGRELAY_FORWARD_HEADER=A: b", envMemoryStore + "=1", "HOME=/root"}},
		{name: "a typo", environ: []string{"TGRELAY_TOKN=123:value-never-printed"}, want: []string{"TGRELAY_TOKN is not a tgrelay variable and is ignored; did you mean TGRELAY_TOKEN?"}},
		{name: "a swapped letter", environ: []string{"TGRELAY_FROWARD=http://x"}, want: []string{"TGRELAY_FROWARD is not a tgrelay variable and is ignored; did you mean TGRELAY_FORWARD?"}},
		{name: "the secret's flag name", environ: []string{"TGRELAY_SECRET=value-never-printed"}, want: []string{"TGRELAY_SECRET is not a tgrelay variable and is ignored; did you mean TGRELAY_WEBHOOK_SECRET?"}},
		{name: "lower case", environ: []string{"TGRELAY_db=x"}, want: []string{"TGRELAY_db is not a tgrelay variable and is ignored; did you mean TGRELAY_DB?"}},
		{name: "nothing close", environ: []string{"TGRELAY_BOT_TOKEN=x", "TGRELAY_ZZZZZZZZZZ=x"}, want: []string{
			"TGRELAY_BOT_TOKEN is not a tgrelay variable and is ignored",
			"TGRELAY_ZZZZZZZZZZ is not a tgrelay variable and is ignored",
		}},
		{name: "a short name is not stretched", environ: []string{"TGRELAY_X=1"}, want: []string{"TGRELAY_X is not a tgrelay variable and is ignored"}},
		{name: "other prefixes are not ours", environ: []string{"TGRELAYTOKEN=x", "MY_TGRELAY_TOKN=x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, u := range unknownEnv(tc.environ) {
				got = append(got, u.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for _, line := range got {
				if strings.Contains(line, "value-never-printed") {
					t.Errorf("a warning prints the value: %q", line)
				}
			}
		})
	}
}

// TestKnownEnvCoversEveryReader: every TGRELAY_ name this package's code
// reads or its help mentions is one knownEnv has, so the warning and the
// readers cannot disagree.
func TestKnownEnvCoversEveryReader(t *testing.T) {
	t.Parallel()
	known := knownEnv()
	word := regexp.MustCompile(envPrefix + `[A-Z0-9_]*[A-Z0-9]`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %v", fset.Position(lit.Pos()), err)
			}
			for _, name := range word.FindAllString(s, -1) {
				seen++
				if !known[name] {
					t.Errorf("%s: %s is read or named but not in knownEnv: start would warn that it is unknown", fset.Position(lit.Pos()), name)
				}
			}
			return true
		})
	}
	if seen < 10 {
		t.Errorf("found only %d TGRELAY_ names in the sources: is the scan broken?", seen)
	}
}

// TestCLIWarnsOfAMisspeltVariable: a misspelt variable is named on stderr
// with the name it was meant to be, before the command goes on, and its
// value is never printed.
func TestCLIWarnsOfAMisspeltVariable(t *testing.T) {
	t.Parallel()
	const value = "123456:misspelt-token-value"
	_, stderr, code := runBin(t, []string{"TGRELAY_TOKN=" + value}, "send", "--chat", "1", "--text", "hi")
	if code != exitUsage {
		t.Errorf("exit code = %d, want %d (no token)", code, exitUsage)
	}
	want := "tgrelay send: warning: TGRELAY_TOKN is not a tgrelay variable and is ignored; did you mean TGRELAY_TOKEN?\n"
	if !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "no bot token") {
		t.Errorf("stderr = %q, want the warning first, then the error", stderr)
	}
	if strings.Contains(stderr, value) {
		t.Errorf("stderr prints the variable's value: %q", stderr)
	}

	// serve warns through its log, in its log format.
	_, stderr, code = runBin(t, []string{"TGRELAY_FORWRD=http://127.0.0.1:1/", "TGRELAY_LOG_FORMAT=json"}, "serve")
	if code != exitUsage {
		t.Errorf("serve: exit code = %d, want %d (no --forward)", code, exitUsage)
	}
	if !strings.Contains(stderr, `"level":"WARN","msg":"serve: unknown environment variable, ignored","name":"TGRELAY_FORWRD","did_you_mean":"TGRELAY_FORWARD"}`) {
		t.Errorf("serve's stderr lacks the warning:\n%s", stderr)
	}
	if strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("serve's warning prints the variable's value:\n%s", stderr)
	}
}
