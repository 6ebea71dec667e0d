package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinnedBinaryRunsOnItsCPUs: the script -serve-cpus writes runs its
// program, with its arguments, on the listed CPUs only, and a list that is
// not one is refused before anything runs.
func TestPinnedBinaryRunsOnItsCPUs(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("needs taskset (util-linux)")
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "it's a program") // a quote and spaces in the path
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"$1\"\ngrep Cpus_allowed_list /proc/self/status\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "1; rm -rf /", "all"} {
		if _, err := pinnedBinary(dir, "bad", prog, bad); err == nil {
			t.Errorf("list %q accepted", bad)
		}
	}
	pinned, err := pinnedBinary(dir, "pinned", prog, "0")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(pinned, "first arg").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 4 || got[0] != "first" || got[1] != "arg" || got[3] != "0" {
		t.Errorf("the pinned program printed %q; want its argument, then Cpus_allowed_list 0", out)
	}
}
