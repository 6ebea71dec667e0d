package main

import (
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
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

// TestForwardHeaderFromNumberedVariables: --forward-header repeats in the
// environment as TGRELAY_FORWARD_HEADER_1 to _99, one header a line of an
// EnvironmentFile, after TGRELAY_FORWARD_HEADER, in numeric order, gaps
// allowed; a bad one is named without its value; the flag on the command
// line replaces them all.
func TestForwardHeaderFromNumberedVariables(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, args ...string) (*flag.FlagSet, *serveOptions) {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := defineServeFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return fs, o
	}
	lookupIn := func(env map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	}

	t.Run("numbered", func(t *testing.T) {
		t.Parallel()
		fs, o := setup(t)
		env := map[string]string{
			"TGRELAY_FORWARD_HEADER":    "X-Base: 0",
			"TGRELAY_FORWARD_HEADER_10": "X-Many: ten",
			"TGRELAY_FORWARD_HEADER_2":  "X-Many: two",
			"TGRELAY_FORWARD_HEADER_1":  "Authorization: Bearer abc def",
			"TGRELAY_FORWARD_HEADER_99": "X-Last:99",
			"TGRELAY_FORWARD_HEADER_3":  "", // empty: not set, as for every variable
		}
		if err := applyEnv(fs, lookupIn(env)); err != nil {
			t.Fatal(err)
		}
		want := http.Header{
			"X-Base":        {"0"},
			"Authorization": {"Bearer abc def"},
			"X-Many":        {"two", "ten"},
			"X-Last":        {"99"},
		}
		if got := o.relayConfig().Forward.Header; !reflect.DeepEqual(got, want) {
			t.Errorf("Forward.Header = %v, want %v", got, want)
		}
	})
	t.Run("newlines still work", func(t *testing.T) {
		t.Parallel()
		fs, o := setup(t)
		if err := applyEnv(fs, lookupIn(map[string]string{"TGRELAY_FORWARD_HEADER": "X-A: 1\nX-B: 2\n"})); err != nil {
			t.Fatal(err)
		}
		if got := o.forwardHeader.h; got.Get("X-A") != "1" || got.Get("X-B") != "2" || len(got) != 2 {
			t.Errorf("headers = %v, want X-A and X-B", got)
		}
	})
	t.Run("a bad one is named, not quoted", func(t *testing.T) {
		t.Parallel()
		fs, _ := setup(t)
		err := applyEnv(fs, lookupIn(map[string]string{"TGRELAY_FORWARD_HEADER_7": "Authorization Bearer value-never-printed"}))
		ue, ok := errors.AsType[*usageError](err)
		if !ok || !strings.HasPrefix(ue.msg, "TGRELAY_FORWARD_HEADER_7: invalid value for --forward-header") || strings.Contains(ue.msg, "value-never-printed") {
			t.Errorf("applyEnv = %v, want a usage error naming TGRELAY_FORWARD_HEADER_7 and not its value", err)
		}
	})
	t.Run("the flag wins", func(t *testing.T) {
		t.Parallel()
		fs, o := setup(t, "--forward-header", "X-Flag: 1")
		if err := applyEnv(fs, lookupIn(map[string]string{"TGRELAY_FORWARD_HEADER_1": "X-Env: 1"})); err != nil {
			t.Fatal(err)
		}
		if got := o.forwardHeader.h; len(got) != 1 || got.Get("X-Flag") != "1" {
			t.Errorf("headers = %v, want only the flag's", got)
		}
	})
	t.Run("known, and only up to 99", func(t *testing.T) {
		t.Parallel()
		got := unknownEnv([]string{"TGRELAY_FORWARD_HEADER_1=a: b", "TGRELAY_FORWARD_HEADER_99=a: b", "TGRELAY_FORWARD_HEADER_100=a: b", "TGRELAY_FORWARD_HEADER_01=a: b"})
		if len(got) != 2 || got[0].name != "TGRELAY_FORWARD_HEADER_01" || got[1].name != "TGRELAY_FORWARD_HEADER_100" {
			t.Errorf("unknown = %v, want _01 and _100", got)
		}
	})
}

// The variables the repository's CI, docs and examples set are all known,
// so that neither CI's runs nor a user following the docs draw a warning.
func TestKnownEnvCoversTheRepository(t *testing.T) {
	t.Parallel()
	known := knownEnv()
	word := regexp.MustCompile(envPrefix + `[A-Z0-9_]*[A-Z0-9]`)
	var files []string
	for _, pattern := range []string{"../../.ci/run", "../../README.md", "../../docs/*.md", "../../docs/*/*", "../../examples/*/*"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	// Misspellings the docs show on purpose, as the warning's example.
	shown := map[string]bool{"TGRELAY_TOKN": true}
	seen := 0
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // a directory
		}
		for _, name := range word.FindAllString(string(b), -1) {
			seen++
			if !known[name] && !shown[name] {
				t.Errorf("%s names %s, which tgrelay does not know: it would warn that it is unknown", path, name)
			}
		}
	}
	if seen < 10 {
		t.Errorf("found only %d TGRELAY_ names in the repository: is the scan broken?", seen)
	}
}
