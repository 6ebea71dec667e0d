package main

import (
	"bufio"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/relay"
)

// systemdDir holds the documented unit and its environment file.
var systemdDir = filepath.Join("..", "..", "docs", "systemd")

// unitDirectives parses a systemd unit into section.key -> values, joining
// continued lines.
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section, pending := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if strings.HasSuffix(line, "\\") {
			pending = strings.TrimSuffix(line, "\\")
			continue
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not a directive: %q", path, line)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSystemdUnitRunsServeWithItsFlags(t *testing.T) {
	t.Parallel()
	u := unitDirectives(t, filepath.Join(systemdDir, "tgrelay.service"))
	exec := u["Service.ExecStart"]
	if len(exec) != 1 {
		t.Fatalf("ExecStart = %q, want one", exec)
	}
	args := strings.Fields(exec[0])
	if len(args) < 2 || filepath.Base(args[0]) != "tgrelay" || args[1] != "serve" {
		t.Fatalf("ExecStart = %q, want tgrelay serve ...", exec[0])
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defineServeFlags(fs)
	if err := fs.Parse(args[2:]); err != nil || fs.NArg() != 0 {
		t.Errorf("serve refuses ExecStart's arguments %q: %v", args[2:], err)
	}
	if got := u["Service.EnvironmentFile"]; len(got) != 1 || got[0] != "/etc/tgrelay/tgrelay.env" {
		t.Errorf("EnvironmentFile = %q, want /etc/tgrelay/tgrelay.env (as the README says)", got)
	}
	stop, err := time.ParseDuration(strings.Join(u["Service.TimeoutStopSec"], ""))
	if err != nil || stop <= relay.DefaultDrainTimeout {
		t.Errorf("TimeoutStopSec = %q: want a duration above serve's drain timeout %v", u["Service.TimeoutStopSec"], relay.DefaultDrainTimeout)
	}
	if u["Service.User"] == nil || u["Service.StateDirectory"] == nil {
		t.Error("the unit should run as its own user with a state directory for the database")
	}
}

func TestSystemdEnvironmentFileNamesServeFlags(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defineServeFlags(fs)
	known := knownEnv() // what start does not warn of

	data, err := os.ReadFile(filepath.Join(systemdDir, "tgrelay.env"))
	if err != nil {
		t.Fatal(err)
	}
	active := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		commented := strings.HasPrefix(line, "#")
		body := strings.TrimPrefix(line, "#")
		name, value, ok := strings.Cut(body, "=")
		if !ok || !strings.HasPrefix(name, "TGRELAY_") || strings.ContainsAny(name, " \t") {
			if !commented && strings.TrimSpace(line) != "" {
				t.Errorf("line %d is neither a comment nor NAME=value: %q", i+1, line)
			}
			continue
		}
		switch {
		case known[name]:
		default:
			t.Errorf("line %d: serve has no flag for %s", i+1, name)
			continue
		}
		if strings.ContainsAny(value, "\"' ") {
			t.Errorf("line %d: %s's value has quotes or spaces, which sh and systemd read differently", i+1, name)
		}
		if !commented {
			active[name] = value
		}
	}
	// serve accepts every active value as its flag's.
	if err := applyEnv(fs, func(name string) (string, bool) { v, ok := active[name]; return v, ok }); err != nil {
		t.Errorf("serve refuses the environment file: %v", err)
	}
	for _, name := range []string{"TGRELAY_TOKEN", "TGRELAY_WEBHOOK_SECRET", "TGRELAY_PUBLIC_URL", "TGRELAY_FORWARD", "TGRELAY_DB"} {
		if _, ok := active[name]; !ok {
			t.Errorf("the environment file does not set %s", name)
		}
	}
}
