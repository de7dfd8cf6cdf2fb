package cmd

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// What the command line knows of the backends — their connection flags,
// environment variables and defaults, the knobs each accepts — comes from
// the registry (scenarios.Backend): the flags, their help text and their
// completions are generated here from reg.Backends().

// connBackends are the backends of reg that are reached by a connection.
func connBackends(reg *scenarios.Registry) []scenarios.Backend {
	var out []scenarios.Backend
	for _, b := range reg.Backends() {
		if b.Conn != nil {
			out = append(out, b)
		}
	}
	return out
}

// registerConn registers each server backend's connection flag into c,
// defaulting to its RACETEST_* environment variable.
func registerConn(fs *pflag.FlagSet, reg *scenarios.Registry, c *scenarios.Connections) {
	for _, b := range connBackends(reg) {
		connVar(fs, c, b.Conn, os.Getenv(b.Conn.Env),
			fmt.Sprintf("%s (env %s; default %s)", b.Conn.What, b.Conn.Env, b.Conn.Default))
		if r := b.ReadConn; r != nil {
			connVar(fs, c, r, os.Getenv(r.Env), fmt.Sprintf("%s (env %s; none by default)", r.What, r.Env))
		}
	}
}

// connVar defines conn's flag, which sets conn's address in c (value
// before it is given), as fs.StringVar would for a string.
func connVar(fs *pflag.FlagSet, c *scenarios.Connections, conn *scenarios.Connection, value, usage string) {
	c.Set(conn.Key, value)
	fs.Var(connValue{c: c, key: conn.Key}, conn.Flag, usage)
	if conn.Redact != nil {
		// --help shows the default, here the environment's address: never
		// its password.
		fs.Lookup(conn.Flag).DefValue = conn.Redact(value)
	}
}

// connValue is a connection flag's value: one key of a Connections.
type connValue struct {
	c   *scenarios.Connections
	key string
}

func (f connValue) String() string { return f.c.Get(f.key) }
func (f connValue) Type() string   { return "string" }
func (f connValue) Set(v string) error {
	f.c.Set(f.key, v)
	return nil
}

// checkConnFlags refuses a connection flag given with an empty value: an
// unset variable in a script is a mistake, never "the default".
func checkConnFlags(fs *pflag.FlagSet, reg *scenarios.Registry) error {
	for _, b := range connBackends(reg) {
		if f := fs.Lookup(b.Conn.Flag); f != nil && f.Changed && f.Value.String() == "" {
			return usageErrorf("--%s was given an empty value: name the server (or leave the flag out to use %s or the default)",
				b.Conn.Flag, b.Conn.Env)
		}
	}
	return nil
}

// connEnv is this process's environment with c's connection strings in
// the RACETEST_* variables, where a replica's flags read their defaults.
func connEnv(reg *scenarios.Registry, c scenarios.Connections) []string {
	set := map[string]string{}
	for _, b := range connBackends(reg) {
		set[b.Conn.Env] = c.Get(b.Conn.Key)
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); set[k] == "" {
			env = append(env, kv)
		}
	}
	for _, b := range connBackends(reg) {
		if v := set[b.Conn.Env]; v != "" {
			env = append(env, b.Conn.Env+"="+v)
		}
	}
	return env
}

// backendNames lists reg's backends, in catalog order.
func backendNames(reg *scenarios.Registry) []string {
	var names []string
	for _, b := range reg.Backends() {
		names = append(names, b.Name)
	}
	return names
}

// knob is one of the knobs a backend declares it accepts.
type knob func(scenarios.Backend) []string

var (
	isolationsOf knob = func(b scenarios.Backend) []string { return b.Isolations }
	enginesOf    knob = func(b scenarios.Backend) []string { return b.Engines }
	releasesOf   knob = func(b scenarios.Backend) []string { return b.Releases }
)

// knobValues are the values of k that some backend of reg accepts, and the
// backends that accept any.
func knobValues(reg *scenarios.Registry, k knob) (values, backends []string) {
	for _, b := range reg.Backends() {
		vs := k(b)
		if len(vs) == 0 {
			continue
		}
		backends = append(backends, b.Name)
		for _, v := range vs {
			if !slices.Contains(values, v) {
				values = append(values, v)
			}
		}
	}
	return values, backends
}

// orList joins names as help text says them: "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func isolationHelp(reg *scenarios.Registry) string {
	levels, on := knobValues(reg, isolationsOf)
	return fmt.Sprintf("%s backends: %s (default: the server's)", strings.Join(on, " and "), orList(levels))
}

func engineHelp(reg *scenarios.Registry) string {
	engines, on := knobValues(reg, enginesOf)
	if len(engines) == 0 {
		return "storage engine (no backend here has a choice)"
	}
	return fmt.Sprintf("%s backend: storage engine, %s (default), %s", strings.Join(on, " and "), engines[0], orList(engines[1:]))
}

func releaseHelp(reg *scenarios.Registry) string {
	modes := []string{string(release.Auto), string(release.Gate)}
	var parts []string
	values, _ := knobValues(reg, releasesOf)
	for _, m := range values {
		var on []string
		for _, b := range reg.Backends() {
			if slices.Contains(b.Releases, m) {
				on = append(on, b.Name)
			}
		}
		modes = append(modes, m)
		parts = append(parts, fmt.Sprintf("%s on %s", m, strings.Join(on, ", ")))
	}
	help := "how each burst's attempts are released: " + orList(modes) + " (auto, the default: last-byte where the backend has a wire, else the gate)"
	if slices.Contains(values, string(release.LastByte)) {
		help += " (last-byte: each first request held back by its last byte, all released in one loop)"
	}
	if len(parts) > 0 {
		help += "; " + strings.Join(parts, "; ")
	}
	return help
}

// scenarioVariants is every --variant scenario takes on any backend: the
// ones backends register, and those its spec lists (the isolation
// anomalies', which the SQL and Redis backends read from the spec).
func scenarioVariants(reg *scenarios.Registry, scenario string) []string {
	vs := reg.Variants(scenario, "")
	if spec, err := reg.Scenario(scenario); err == nil {
		for _, v := range spec.Variants {
			if !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
	}
	return vs
}

// variantHelp lists each scenario's variants.
func variantHelp(reg *scenarios.Registry) string {
	var parts []string
	for _, s := range reg.Scenarios() {
		if vs := scenarioVariants(reg, s.Name); len(vs) > 0 {
			parts = append(parts, s.Name+": "+strings.Join(vs, ", "))
		}
	}
	return "scenario variant (default: the scenario's own) — " + strings.Join(parts, "; ")
}

// expectWords are the expectations --expect takes, as completion offers them.
var expectWords = []string{"safe", "race", "lost", "max=", "range=", "catalog"}

// fixed completes a flag with a fixed list.
func fixed(values []string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeEnums registers the completions of the enum flags c has: each
// list the same data the code checks against.
func completeEnums(c *cobra.Command, reg *scenarios.Registry) {
	fs := c.Flags()
	has := func(name string) bool { return fs.Lookup(name) != nil }
	reg1 := func(name string, f func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)) {
		if has(name) {
			if err := c.RegisterFlagCompletionFunc(name, f); err != nil {
				panic(err) // a programming error: registered twice
			}
		}
	}
	reg1("backend", fixed(backendNames(reg)))
	reg1("format", fixed(report.Formats()))
	reg1("expect", fixed(expectWords))
	isolations, _ := knobValues(reg, isolationsOf)
	reg1("isolation", fixed(isolations))
	engines, _ := knobValues(reg, enginesOf)
	reg1("engine", fixed(engines))
	releases, _ := knobValues(reg, releasesOf)
	reg1("release", fixed(append([]string{string(release.Gate)}, releases...)))
	reg1("variant", func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		var vs []string
		if len(args) > 0 {
			vs = scenarioVariants(reg, args[0])
		} else {
			for _, s := range reg.Scenarios() {
				for _, v := range scenarioVariants(reg, s.Name) {
					if !slices.Contains(vs, v) {
						vs = append(vs, v)
					}
				}
			}
		}
		return vs, cobra.ShellCompDirectiveNoFileComp
	})
}

// backendHelp is the help of a --backend that takes any of reg's backends.
func backendHelp(reg *scenarios.Registry) string {
	return "where the shared state lives: " + strings.Join(backendNames(reg), ", ") + " (see 'racetest list')"
}

// oneScenario accepts the one scenario argument of verb.
func oneScenario(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErrorf("%s takes one scenario (see 'racetest list'), got %d arguments", verb, len(args))
		}
		return nil
	}
}

// completeScenario completes a command's one scenario argument.
func completeScenario(reg *scenarios.Registry) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return scenarioNames(reg), cobra.ShellCompDirectiveNoFileComp
	}
}
