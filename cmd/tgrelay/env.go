package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// envPrefix starts the name of every environment variable tgrelay reads.
const envPrefix = "TGRELAY_"

// envName is the environment variable of a serve flag.
func envName(flagName string) string {
	if flagName == "secret" {
		return envWebhookSecret
	}
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// maxEnvRepeat bounds the numbered variables of a repeatable flag:
// NAME_1 to NAME_99.
const maxEnvRepeat = 99

// envRepeatable is a flag value that, like its repeatable flag, takes
// several values from the environment: besides its variable (envName),
// the numbered ones NAME_1 to NAME_<maxEnvRepeat>, one value each, so that
// each fits on a line of a systemd EnvironmentFile.
type envRepeatable interface {
	flag.Value
	repeatsInEnv()
}

// envNames returns the variables of flag f in the order applyEnv applies
// them: its envName, then, for an envRepeatable flag, NAME_1 to
// NAME_<maxEnvRepeat>.
func envNames(f *flag.Flag) []string {
	name := envName(f.Name)
	if _, ok := f.Value.(envRepeatable); !ok {
		return []string{name}
	}
	names := []string{name}
	for i := 1; i <= maxEnvRepeat; i++ {
		names = append(names, name+"_"+strconv.Itoa(i))
	}
	return names
}

// applyEnv sets every flag not given on the command line from its
// environment variables (envNames), those that are set and not empty, in
// order; a flag given on the command line ignores them all.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		for _, name := range envNames(f) {
			v, ok := lookup(name)
			if !ok || v == "" {
				continue
			}
			if serr := fs.Set(f.Name, v); serr != nil {
				msg := fmt.Sprintf("%s: invalid value for --%s", name, f.Name)
				if f.Name != "token" && f.Name != "secret" && f.Name != "admin-token" && f.Name != "app-secret-token" {
					msg += ": " + valueProblem(f, v, serr.Error())
				}
				err = &usageError{msg: msg, hint: "Run 'tgrelay help serve' for usage."}
				return
			}
		}
	})
	return err
}

// testSeamEnv are the variables serve reads for tgrelay's own tests and
// benchmarks (serve_testhook.go, serve_tls.go); they are not documented,
// but they are not mistakes either.
var testSeamEnv = []string{
	envGatewayStopAfterIntent, envCPUProfile, envMemProfile, envTrace, envMemoryStore,
	envSelfSignedValidity, envACMERenewBefore,
}

// projectEnv are the variables tgrelay's own test suite and CI read
// (internal/pgtest, the browser, Node and ACME tests; .ci/run exports
// them); set while tgrelay runs under its own tests, they are not mistakes.
var projectEnv = []string{
	"TGRELAY_PG_URL", "TGRELAY_REQUIRE_PG", "TGRELAY_REQUIRE_BROWSER", "TGRELAY_REQUIRE_NODE",
	"TGRELAY_REQUIRE_PEBBLE", "TGRELAY_NODE_MODULES", "TGRELAY_CHROMIUM", "TGRELAY_SCREENSHOTS",
}

// knownEnv is the one list of the TGRELAY_ variables tgrelay reads: those
// of each serve flag (envNames), which are also every variable the other
// commands read (send, webhook and broadcast read TGRELAY_TOKEN and
// TGRELAY_WEBHOOK_SECRET, updates TGRELAY_DB and TGRELAY_TABLE, doctor all
// of serve's), the test seams and the project's own test variables. TestKnownEnvCoversEveryReader keeps
// every TGRELAY_ name in this package's code and docs in it.
func knownEnv() map[string]bool {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defineServeFlags(fs)
	known := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		for _, name := range envNames(f) {
			known[name] = true
		}
	})
	for _, name := range slices.Concat(testSeamEnv, projectEnv) {
		known[name] = true
	}
	return known
}

// unknownEnvVar is a TGRELAY_ variable in the environment that tgrelay does
// not read, with the known name it was most likely meant to be ("" when none
// is close).
type unknownEnvVar struct {
	name, suggest string
}

// String says what is wrong in one line, naming the variable and never its
// value.
func (u unknownEnvVar) String() string {
	s := u.name + " is not a tgrelay variable and is ignored"
	if u.suggest != "" {
		s += "; did you mean " + u.suggest + "?"
	}
	return s
}

// unknownEnv returns the TGRELAY_ variables of environ (as os.Environ gives
// it: NAME=value) that are not in knownEnv, sorted by name.
func unknownEnv(environ []string) []unknownEnvVar {
	known := knownEnv()
	var out []unknownEnvVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || known[name] {
			continue
		}
		out = append(out, unknownEnvVar{name: name, suggest: closestEnv(name, known)})
	}
	slices.SortFunc(out, func(a, b unknownEnvVar) int { return strings.Compare(a.name, b.name) })
	return out
}

// closestEnv returns the known variable name was most likely meant to be:
// the variable of the serve flag it spells (TGRELAY_SECRET is
// --secret's, TGRELAY_WEBHOOK_SECRET), else the one within a few edits
// (the first by name of the nearest), else "".
func closestEnv(name string, known map[string]bool) string {
	flagName := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "-"))
	if env := envName(flagName); known[env] && env != name {
		return env
	}
	rest := strings.TrimPrefix(name, envPrefix)
	// A typo is a letter or two (a swap is two edits): one edit in a name
	// of up to 4 letters, two up to 9, three beyond.
	limit := min(3, 1+len(rest)/5)
	best, bestDist := "", limit+1
	for _, k := range slices.Sorted(maps.Keys(known)) {
		if d := editDistance(strings.ToUpper(rest), strings.TrimPrefix(k, envPrefix)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes
// (variable names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// warnUnknownEnv writes one line to stderr for each TGRELAY_ variable of
// environ tgrelay does not read, for the commands that read the
// environment and have no logger.
func warnUnknownEnv(stderr io.Writer, cmd string, environ []string) {
	for _, u := range unknownEnv(environ) {
		fmt.Fprintf(stderr, "tgrelay %s: warning: %s\n", cmd, u)
	}
}

// logUnknownEnv logs a warning for each TGRELAY_ variable of environ
// tgrelay does not read, for serve, whose stderr is its log.
func logUnknownEnv(log *slog.Logger, environ []string) {
	for _, u := range unknownEnv(environ) {
		attrs := []any{"name", u.name}
		if u.suggest != "" {
			attrs = append(attrs, "did_you_mean", u.suggest)
		}
		log.Warn("serve: unknown environment variable, ignored", attrs...)
	}
}
