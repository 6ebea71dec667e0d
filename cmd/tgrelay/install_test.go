package main

// Tests of how tgrelay is installed: its version line from the build info,
// a local build in a clone, and 'go install .../cmd/tgrelay@latest' from a
// module proxy that serves this tree as a release (a file:// proxy, so no
// network is used).

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "401b00408a18e92fc354259bd8d9c3e3928d0831"
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     string
	}{
		{"go install @version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "", "tgrelay v1.2.3 go1.26.8"},
		{"a clone's pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261203161656-401b00408a18+dirty"}, Settings: vcs(rev, "2026-12-03T16:16:56Z", "true")},
			"", "tgrelay v0.0.0-20261203161656-401b00408a18+dirty go1.26.8"},
		{"VCS information only", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "2026-12-03T16:16:56Z", "false")},
			"", "tgrelay devel 401b00408a18 (2026-12-03T16:16:56Z) go1.26.8"},
		{"VCS information, modified", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "2026-12-03T16:16:56Z", "true")},
			"", "tgrelay devel 401b00408a18+dirty (2026-12-03T16:16:56Z) go1.26.8"},
		{"nothing known", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "tgrelay (devel) go1.26.8"},
		{"no build info", nil, "", "tgrelay (devel) go1.26.8"},
		{"set at link time", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "v9.9.9-debian1", "tgrelay v9.9.9-debian1 go1.26.8"},
	} {
		if got := versionOf(tc.bi, tc.override, "go1.26.8"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// goCmd runs the go command in dir with env added, failing the test with
// its output.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func runBinary(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return string(out)
}

// TestInstall builds tgrelay as its users do: in a clone (the version names
// the commit, and "+dirty" once the tree changes), and with 'go install
// github.com/tgrelay/tgrelay/cmd/tgrelay@latest' from a module proxy that
// serves the committed tree as v0.0.1 (a go.mod with replace directives, an
// embed of a file the module zip leaves out, or a package importing a
// nested module would fail here).
func TestInstall(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIPPED: git is not installed; the install test clones this repository")
	}
	if err := exec.CommandContext(t.Context(), "git", "-C", root, "rev-parse", "HEAD").Run(); err != nil {
		t.Skip("SKIPPED: this source tree is not a git checkout; the install test clones it")
	}
	tmp := t.TempDir()
	clone := filepath.Join(tmp, "clone")
	if out, err := exec.CommandContext(t.Context(), "git", "clone", "-q", "--no-hardlinks", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	head := strings.TrimSpace(gitOut(t, clone, "rev-parse", "HEAD"))
	// The dependencies come from the module cache, so their compiled
	// packages are shared with every other build here; only tgrelay's own
	// packages are compiled for the clone and again for the install.
	env := []string{"GOFLAGS=-buildvcs=true", "GOTOOLCHAIN=local"}

	bin := filepath.Join(tmp, "tgrelay")
	goCmd(t, clone, env, "build", "-o", bin, "./cmd/tgrelay")
	if v := runBinary(t, bin, "version"); !strings.Contains(v, head[:12]) || strings.Contains(v, "(devel)") || strings.Contains(v, "dirty") {
		t.Errorf("a clean clone's version = %q, want one naming %s", v, head[:12])
	}
	if err := os.WriteFile(filepath.Join(clone, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	goCmd(t, clone, env, "build", "-o", bin, "./cmd/tgrelay")
	if v := runBinary(t, bin, "version"); !strings.Contains(v, head[:12]) || !strings.Contains(v, "+dirty") {
		t.Errorf("a changed clone's version = %q, want %s with +dirty", v, head[:12])
	}
	if err := exec.CommandContext(t.Context(), "git", "-C", clone, "checkout", "-q", "README.md").Run(); err != nil {
		t.Fatal(err)
	}

	// A module proxy serving the committed tree as a release. The version is
	// new for every run, since the module cache keeps what it got under a
	// version forever; what this test leaves there is removed at its end.
	const module = "github.com/tgrelay/tgrelay"
	version := fmt.Sprintf("v0.0.%d", time.Now().UnixNano())
	modcache := strings.TrimSpace(goCmd(t, tmp, nil, "env", "GOMODCACHE"))
	t.Cleanup(func() {
		_ = os.RemoveAll(filepath.Join(modcache, module+"@"+version))
		leftovers, _ := filepath.Glob(filepath.Join(modcache, "cache", "download", module, "@v", version+".*"))
		// The clone's builds record their pseudo-version's .info too.
		pseudo, _ := filepath.Glob(filepath.Join(modcache, "cache", "download", module, "@v", "v0.0.0-*-"+head[:12]+".info"))
		for _, f := range append(leftovers, pseudo...) {
			_ = os.Remove(f)
		}
	})
	proxy := filepath.Join(tmp, "proxy")
	dir := filepath.Join(proxy, module, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(clone, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": fmt.Appendf(nil, `{"Version":%q,"Time":"2026-12-01T00:00:00Z"}`, version),
		version + ".mod":  gomod,
		version + ".zip":  moduleZip(t, clone, module+"@"+version),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gobin := filepath.Join(tmp, "bin")
	work := filepath.Join(tmp, "elsewhere") // outside any module
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	goCmd(t, work, append(env,
		"GOPROXY=file://"+filepath.ToSlash(proxy), "GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GOBIN="+gobin,
		"GOFLAGS=-buildvcs=true -modcacherw"), // writable, so that the cleanup can remove it
		"install", module+"/cmd/tgrelay@latest")
	if v := runBinary(t, filepath.Join(gobin, "tgrelay"), "version"); !strings.HasPrefix(v, "tgrelay "+version+" go") {
		t.Errorf("the installed version = %q, want tgrelay %s", v, version)
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// moduleZip zips the committed files of the module in dir under prefix, as
// the go command's module zips hold them: no directory that is another
// module (its own go.mod), no vendor directory, regular files only.
func moduleZip(t *testing.T, dir, prefix string) []byte {
	t.Helper()
	var nested []string
	for name := range strings.SplitSeq(gitOut(t, dir, "ls-files"), "\n") {
		if strings.HasSuffix(name, "/go.mod") {
			nested = append(nested, strings.TrimSuffix(name, "go.mod"))
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	n := 0
	for name := range strings.SplitSeq(gitOut(t, dir, "ls-files"), "\n") {
		if name == "" || strings.HasPrefix(name, "vendor/") || strings.Contains(name, "/vendor/") {
			continue
		}
		if slicesHasPrefix(nested, name) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(prefix + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("module zip: %d files, %d bytes", n, buf.Len())
	return buf.Bytes()
}

func slicesHasPrefix(prefixes []string, name string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
