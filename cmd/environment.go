package cmd

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/scenarios"
)

// Settings by environment: every flag of every command can be
// given as RACETEST_<FLAG>, the flag's name in capitals with '-' as '_'
// (--bursts is RACETEST_BURSTS, --solo-every RACETEST_SOLO_EVERY), as k6
// reads K6_*. A CI matrix can then vary a run without editing its suite
// or its command line. The command line wins over the environment, which
// wins over the flag's default; a variable counts as the flag given, so
// rules that depend on a flag being given ("--bursts overrides prove:")
// hold for it too.
//
// Left out: the connection flags (--postgres-url, …), which have read
// their RACETEST_* variables all along, in an order of their own in a
// suite (after the file's defaults.connections); and --help and
// --version, which are not settings.

// envPrefix starts every settings variable.
const envPrefix = "RACETEST_"

// envName is the variable that sets the flag named name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// envSkipped reports whether the flag is not a setting the environment
// may give.
func envSkipped(f *pflag.Flag, reg *scenarios.Registry) bool {
	if f.Name == "help" || f.Name == "version" {
		return true
	}
	for _, b := range connBackends(reg) {
		if f.Name == b.Conn.Flag || (b.ReadConn != nil && f.Name == b.ReadConn.Flag) {
			return true
		}
	}
	return false
}

// applyEnv gives each flag of c that the command line did not set the
// value of its RACETEST_* variable, in the flags' sorted order so that
// the first bad variable is always the same one. A value the flag refuses
// is a usage error that names the variable.
func applyEnv(c *cobra.Command, reg *scenarios.Registry, lookup func(string) (string, bool)) error {
	if lookup == nil {
		return nil
	}
	fs := c.Flags()
	var flags []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, f := range flags {
		if f.Changed || envSkipped(f, reg) {
			continue
		}
		v, ok := lookup(envName(f.Name))
		if !ok {
			continue
		}
		if fs.Set(f.Name, v) != nil {
			return usageErrorf("%s=%q is not a value for --%s (it takes %s): unset it, or give --%s on the command line, which wins",
				envName(f.Name), v, f.Name, valueKind(f), f.Name)
		}
		_ = fs.SetAnnotation(f.Name, envAnnotation, []string{envName(f.Name)})
	}
	return nil
}

// otherEnv are the RACETEST_ variables that set no flag but that racetest,
// its tests and its scripts read (a CI job sets them for the tests and
// runs racetest in the same environment), and otherEnvPrefixes the
// families of them. TestEveryRacetestVariableIsKnown keeps the lists whole.
var (
	otherEnv = []string{"RACETEST_ARTIFACTS", "RACETEST_FAULTS", "RACETEST_FERRETDB_ADDR", "RACETEST_HTTPFIRE_TARGET",
		"RACETEST_INTERRUPTS", "RACETEST_MUTATION", "RACETEST_MYSQL_FILL_CONNECTIONS", "RACETEST_PG_BIN", "RACETEST_PROBE_BURN",
		"RACETEST_SCRIPTS_JUNIT", "RACETEST_CLUSTERS_JUNIT"}
	otherEnvPrefixes = []string{"RACETEST_BENCH_", "RACETEST_CLUSTER_", "RACETEST_MEASURE_", "RACETEST_REQUIRE_", "RACETEST_SERVE_TEST_"}
)

// knownEnv is every RACETEST_ variable racetest reads: each flag's of every
// command (a CI job sets RACETEST_SOLO_EVERY once for the commands that
// take it), the connections' and otherEnv.
func knownEnv(root *cobra.Command, reg *scenarios.Registry) []string {
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { seen[envName(f.Name)] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { seen[envName(f.Name)] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, b := range reg.Backends() {
		for _, conn := range []*scenarios.Connection{b.Conn, b.ReadConn} {
			if conn != nil && conn.Env != "" {
				seen[conn.Env] = true
			}
		}
	}
	for _, n := range otherEnv {
		seen[n] = true
	}
	known := make([]string, 0, len(seen))
	for n := range seen {
		known = append(known, n)
	}
	sort.Strings(known)
	return known
}

// unknownEnv warns of each RACETEST_ variable in environ that racetest does
// not read: as a misspelled flag is an error, RACETEST_BURST=3 must not
// silently run the default 100 bursts. A warning, not an error: a CI
// environment carries variables for other tools, and only racetest's own
// prefix is looked at.
func unknownEnv(w io.Writer, environ []string, known []string) {
	isKnown := map[string]bool{}
	for _, n := range known {
		isKnown[n] = true
	}
	var names []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || isKnown[name] || slices.ContainsFunc(otherEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		hint := ""
		if s := scenarios.Suggest(name, known); s != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", s)
		}
		fmt.Fprintf(w, "racetest: warning: %s is not a racetest setting%s; it is ignored ('racetest help environment' lists them)\n",
			printable.Line(name), hint)
	}
}

// envAnnotation marks a flag whose value came from its RACETEST_*
// variable.
const envAnnotation = "racetest_env"

// envSource names the variables behind the flags a usage error names:
// "--bursts must be at least 1" is a puzzle when the command line has no
// --bursts and RACETEST_BURSTS=-3 gave it.
func envSource(c *cobra.Command, msg string) string {
	var from []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		v := f.Annotations[envAnnotation]
		if len(v) == 0 || !namesFlag(msg, f.Name) {
			return
		}
		from = append(from, fmt.Sprintf("--%s came from %s=%q: unset it, or give --%s on the command line, which wins", f.Name, v[0], f.Value.String(), f.Name))
	})
	if len(from) == 0 {
		return ""
	}
	return " (" + strings.Join(from, "; ") + ")"
}

// namesFlag reports whether msg names --name as a flag of its own, not the
// start of a longer one (--bursts in --bursts-per-second).
func namesFlag(msg, name string) bool {
	flag := "--" + name
	for i := strings.Index(msg, flag); i >= 0; {
		end := i + len(flag)
		if end == len(msg) || !isFlagByte(msg[end]) {
			return true
		}
		j := strings.Index(msg[end:], flag)
		if j < 0 {
			break
		}
		i = end + j
	}
	return false
}

func isFlagByte(b byte) bool { return b == '-' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }

// onCommandLine reports whether the flag named name was given on the
// command line, not by the environment. A check that refuses a flag
// where it has no use refuses only this one: a variable set once for a
// CI matrix (RACETEST_SOLO_EVERY) would otherwise fail every run it does
// not apply to.
func onCommandLine(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Changed && f.Annotations[envAnnotation] == nil
}

// valueKind says what a flag takes, for a person.
func valueKind(f *pflag.Flag) string {
	switch t := f.Value.Type(); t {
	case "int", "int64", "uint", "uint64":
		return "a whole number"
	case "bool":
		return "true or false"
	case "duration":
		return "a duration such as 250ms or 2s"
	case "float64":
		return "a number"
	default:
		return "a " + t
	}
}

// environmentHelp is 'racetest help environment': every variable, the
// flag it sets and the commands that have it, read from the command tree
// so that it cannot fall behind.
func environmentHelp(root *cobra.Command, reg *scenarios.Registry) string {
	type setting struct {
		flag     string
		commands []string
	}
	vars := map[string]*setting{}
	for _, c := range root.Commands() {
		if c.Hidden || !c.IsAvailableCommand() || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if envSkipped(f, reg) || f.Hidden {
				return
			}
			name := envName(f.Name)
			s := vars[name]
			if s == nil {
				s = &setting{flag: "--" + f.Name}
				vars[name] = s
			}
			s.commands = append(s.commands, c.Name())
		})
	}
	names := make([]string, 0, len(vars))
	width := 0
	for n := range vars {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(`Every flag can be set by a variable: RACETEST_ and the flag's name in capitals, '-' as '_'.
The command line wins over the environment, and the environment over the default; a
variable counts as the flag given. A CI matrix can so vary a run without editing its command:

  RACETEST_ATTEMPTS=32 RACETEST_BURSTS=500 racetest run check-then-write -b postgres

A suite file reads variables itself: ${NAME} or ${NAME:-default} in any value (docs/suites.md).

The connection flags are not listed here: they read RACETEST_POSTGRES_URL, RACETEST_MYSQL_DSN,
RACETEST_REDIS_URL and RACETEST_MONGO_URI as 'racetest run --help' says (in a suite, after the
file's defaults.connections).

`)
	for _, n := range names {
		s := vars[n]
		fmt.Fprintf(&b, "  %-*s  %-22s %s\n", width, n, s.flag, strings.Join(s.commands, ", "))
	}
	return strings.TrimRight(b.String(), "\n")
}

// newEnvironmentTopic is the help topic 'racetest help environment'.
func newEnvironmentTopic(root *cobra.Command, reg *scenarios.Registry) *cobra.Command {
	topic := &cobra.Command{
		Use:   "environment",
		Short: "Settings by environment: RACETEST_<FLAG> for every flag",
	}
	// The tree is complete only once every command is added: build the
	// text when it is asked for.
	topic.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprintln(c.OutOrStdout(), environmentHelp(root, reg))
	})
	return topic
}
