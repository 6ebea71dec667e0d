// Command tgrelay makes a Telegram bot keep its promises: it receives
// updates durably, relays them to a bot in any language, and sends
// messages and broadcasts with honest outcomes.
//
// Usage:
//
//	tgrelay <command> [flags]
//	tgrelay help [command]
//	tgrelay version
//
// Run "tgrelay help" for the list of commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

func main() {
	ownStdLog.Store(true)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand. Its run function parses its own flags (with
// [parseFlags]), writes only to the writers it is given, and returns when
// ctx is cancelled (SIGINT or SIGTERM) if it runs until stopped.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the command table; adding a subcommand is one line here and
// one file (<name>.go) defining its run function.
func commands() []command {
	return []command{
		{"sandbox", "run a fake Telegram Bot API server with a control API, for integration tests", runSandbox},
		{"serve", "receive updates durably (webhook or long polling) and forward them to your bot's endpoint", runServe},
		{"broadcast", "send one message to many chats at the rate limit, resumable by name, never twice", runBroadcast},
		{"demo", "an offline end-to-end run: sandbox, serve, an echo bot, retries, poison, a crash", runDemo},
		{"updates", "list, show, acknowledge and requeue stored updates (--db)", runUpdates},
		{"webhook", "set, check or delete the bot's webhook under the ownership rules", runWebhook},
		{"send", "send one message and report its honest outcome (exit code per outcome)", runSend},
		{"doctor", "check a live deployment (token, webhook, HTTPS, secret, app, gateway, store) and say what to fix", runDoctor},
	}
}

// Exit codes of run.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError is a misuse of the command line. run prints it with its hint
// and exits with exitUsage.
type usageError struct {
	msg  string
	hint string
}

func (e *usageError) Error() string { return e.msg }

// run executes the command line args (without the program name) and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return help(ctx, args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	}
	cmd, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "tgrelay: unknown command %q\nRun 'tgrelay help' for the list of commands.\n", args[0])
		return exitUsage
	}
	return report(cmd.name, cmd.run(ctx, args[1:], stdout, stderr), stderr)
}

// report turns a command's error into an exit code, printing it.
func report(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if ue, ok := errors.AsType[*usageError](err); ok {
		fmt.Fprintf(stderr, "tgrelay %s: %s\n", name, ue.msg)
		if ue.hint != "" {
			fmt.Fprintln(stderr, ue.hint)
		}
		return exitUsage
	}
	if le, ok := errors.AsType[*lineError](err); ok {
		fmt.Fprintf(stderr, "tgrelay %s: %s\n%s\n", name, le.msg, le.hint)
	} else {
		fmt.Fprintf(stderr, "tgrelay %s: %v\n", name, err)
	}
	// A command whose outcomes have exit codes of their own (send,
	// broadcast) returns an error that names its code.
	if ec, ok := errors.AsType[interface {
		error
		ExitCode() int
	}](err); ok {
		return ec.ExitCode()
	}
	return exitError
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func help(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return exitOK
	}
	switch args[0] {
	case "help":
		fmt.Fprint(stdout, helpHelp)
		return exitOK
	case "version":
		fmt.Fprint(stdout, versionHelp)
		return exitOK
	}
	cmd, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "tgrelay help: unknown command %q\nRun 'tgrelay help' for the list of commands.\n", args[0])
		return exitUsage
	}
	// A command prints its own usage for -h, and does nothing else.
	return report(cmd.name, cmd.run(ctx, []string{"-h"}, stdout, stdout), stderr)
}

const helpHelp = `Usage: tgrelay help [command]

Help prints the list of commands, or, given a command, its description and
flags (the same as 'tgrelay <command> -h').
`

const versionHelp = `Usage: tgrelay version

Version prints tgrelay's version and the Go version it was built with: the
module version when installed with 'go install ...@version' (or built in a
clone: a tag, or a pseudo-version naming the commit's time and revision, with
"+dirty" when the tree had changes); "devel <revision> (<commit time>)" for a
build with VCS information but no module version; "(devel)" for a build
without either (-buildvcs=false, or a git worktree, which Go does not stamp).
`

func usage(w io.Writer) {
	fmt.Fprint(w, "tgrelay makes a Telegram bot keep its promises.\n\nUsage:\n\n\ttgrelay <command> [flags]\n\nCommands:\n\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "\t%-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\t%-10s %s\n\t%-10s %s\n", "help", "show help for a command", "version", "print the version")
	fmt.Fprint(w, "\nRun 'tgrelay help <command>' for a command's flags.\n")
}

// parseFlags parses args with fs, which the command set up with its flags
// and a Usage that writes to fs.Output(). -h prints the usage to stdout
// and returns flag.ErrHelp; a bad flag or a stray argument is a
// *usageError with a hint.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard) // errors are reported once, by report
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return flag.ErrHelp
	}
	hint := fmt.Sprintf("Run 'tgrelay help %s' for usage.", fs.Name())
	if err != nil {
		return &usageError{msg: flagError(fs, err), hint: hint}
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0)), hint: hint}
	}
	return nil
}

// commandUsage returns a FlagSet Usage function printing text (the
// command's description, with a leading usage line) and the flags.
func commandUsage(fs *flag.FlagSet, text string) func() {
	return func() {
		w := fs.Output()
		fmt.Fprint(w, strings.TrimLeft(text, "\n"))
		fmt.Fprint(w, "\nFlags:\n\n")
		fs.PrintDefaults()
	}
}

// buildVersion, when set at link time (-ldflags "-X main.buildVersion=v1.2.3"),
// is the version printed, for packagers who build outside a module version
// and a VCS checkout.
var buildVersion string

// versionString is tgrelay's version line: see [versionOf].
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionOf(bi, buildVersion, runtime.Version())
}

// versionOf returns "tgrelay <version> <go version>" from the build info:
//   - the module version when the binary was installed with
//     'go install github.com/tgrelay/tgrelay/cmd/tgrelay@<version>', or built
//     in a clone by a Go that stamps one (a tag, or a pseudo-version naming
//     the commit's time and revision, with "+dirty" for uncommitted changes);
//   - otherwise, for a local build with VCS information but no module
//     version, "devel <revision>[+dirty] (<commit time>)";
//   - otherwise "(devel)": built without VCS information (-buildvcs=false,
//     a git worktree, or a source tree without .git).
//
// override, when not empty, replaces all of it but the Go version.
func versionOf(bi *debug.BuildInfo, override, goVersion string) string {
	v := override
	if v == "" && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if v == "" && bi != nil {
		var rev, at string
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			v = "devel " + rev
			if dirty {
				v += "+dirty"
			}
			if at != "" {
				v += " (" + at + ")"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return "tgrelay " + v + " " + goVersion
}
