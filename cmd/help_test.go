package cmd

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/spf13/cobra"
)

// builtinRoot is racetest's command tree over the shipped catalog.
func builtinRoot(t *testing.T) (*cobra.Command, *scenarios.Registry) {
	t.Helper()
	io, _, _ := testStreams()
	reg := builtin.Registry()
	return newCmdRoot(&factory{IO: io, Registry: reg}), reg
}

func subcommand(t *testing.T, root *cobra.Command, name string) *cobra.Command {
	t.Helper()
	c, _, err := root.Find([]string{name})
	if err != nil || c == root {
		t.Fatalf("no command %q: %v", name, err)
	}
	return c
}

// Every enum list in the help of the commands that build scenarios names
// every value the catalog accepts: each backend, each isolation level and
// engine a backend takes, each release mode and where it acts, and each
// scenario's variants, as the implementations check them.
func TestEnumHelpListsWhatTheCatalogAccepts(t *testing.T) {
	root, reg := builtinRoot(t)
	for _, name := range []string{"run", "demo", "serve"} {
		c := subcommand(t, root, name)
		usage := func(flag string) string {
			f := c.Flags().Lookup(flag)
			if f == nil {
				t.Fatalf("%s has no --%s", name, flag)
			}
			return f.Usage
		}
		for _, b := range reg.Backends() {
			if !strings.Contains(usage("backend"), b.Name) {
				t.Errorf("%s --backend help does not name %s: %q", name, b.Name, usage("backend"))
			}
			for _, e := range b.Engines {
				if !strings.Contains(usage("engine"), e) {
					t.Errorf("%s --engine help does not name %s (backend %s): %q", name, e, b.Name, usage("engine"))
				}
			}
			for _, l := range b.Isolations {
				if !strings.Contains(usage("isolation"), l) || !strings.Contains(usage("isolation"), b.Name) {
					t.Errorf("%s --isolation help does not name %s on %s: %q", name, l, b.Name, usage("isolation"))
				}
			}
			if c.Flags().Lookup("release") != nil {
				for _, m := range b.Releases {
					if !regexp.MustCompile(regexp.QuoteMeta(m) + ` on [a-z, ]*\b` + b.Name + `\b`).MatchString(usage("release")) {
						t.Errorf("%s --release help does not say %s acts on %s: %q", name, m, b.Name, usage("release"))
					}
				}
			}
		}
		for _, s := range reg.Scenarios() {
			if vs := reg.Variants(s.Name, ""); len(vs) > 0 && !strings.Contains(usage("variant"), s.Name+": "+strings.Join(vs, ", ")) {
				t.Errorf("%s --variant help does not list %s's variants %v: %q", name, s.Name, vs, usage("variant"))
			}
		}
	}
	for _, c := range root.Commands() {
		if f := c.Flags().Lookup("format"); f != nil {
			for _, format := range report.Formats() {
				if !strings.Contains(f.Usage, format) {
					t.Errorf("%s --format help does not name %s: %q", c.Name(), format, f.Usage)
				}
			}
		}
	}
	// The catalog really has these: a registry that lost them would pass
	// the loop above vacuously.
	mysql, _ := reg.Backend("mysql")
	if !slices.Contains(mysql.Engines, "aria") || len(reg.Variants(scenarios.CheckThenWrite, "")) < 2 {
		t.Fatalf("the catalog declares engines %v and check-then-write variants %v", mysql.Engines, reg.Variants(scenarios.CheckThenWrite, ""))
	}
}

// A backend declares last-byte exactly where the release package applies
// it rather than falling back to the gate.
func TestDeclaredReleasesAreTheOnesThatApply(t *testing.T) {
	_, reg := builtinRoot(t)
	for _, b := range reg.Backends() {
		for _, m := range release.Modes() {
			if m == release.Gate {
				continue
			}
			p, err := release.New(string(m), b.Name)
			if err != nil {
				t.Fatal(err)
			}
			if applies, declared := p.Mode == m, slices.Contains(b.Releases, string(m)); applies != declared {
				t.Errorf("%s on %s: applies %v, declared %v", m, b.Name, applies, declared)
			}
		}
	}
}

// complete asks the command tree for the completions of args, as a shell's
// completion script does.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	io, out, _ := testStreams()
	root := newCmdRoot(&factory{IO: io, Registry: builtin.Registry()})
	root.SetOut(out)
	root.SetArgs(append([]string{cobra.ShellCompRequestCmd}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	var got []string
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, ":") && !strings.HasPrefix(line, "Completion ended") {
			got = append(got, strings.SplitN(line, "\t", 2)[0])
		}
	}
	return got
}

// The enum flags and the scenario argument complete from the same data the
// code checks against: each variant of each scenario, each backend, engine,
// isolation level, release mode and format.
func TestEnumFlagsComplete(t *testing.T) {
	_, reg := builtinRoot(t)
	for _, s := range reg.Scenarios() {
		// The variants backends register, and those the spec lists (the
		// isolation anomalies'): the backends check against either.
		want := reg.Variants(s.Name, "")
		for _, v := range s.Variants {
			if !slices.Contains(want, v) {
				want = append(want, v)
			}
		}
		for _, cmd := range []string{"run", "serve"} {
			if got := complete(t, cmd, s.Name, "--variant", ""); !slices.Equal(got, want) {
				t.Errorf("%s %s --variant completes %v, want %v", cmd, s.Name, got, want)
			}
		}
	}
	var scenarioNames []string
	for _, s := range reg.Scenarios() {
		scenarioNames = append(scenarioNames, s.Name)
	}
	for _, cmd := range []string{"run", "serve"} {
		if got := complete(t, cmd, ""); !slices.Equal(got, scenarioNames) {
			t.Errorf("%s completes the scenario with %v, want %v", cmd, got, scenarioNames)
		}
	}
	engines, _ := knobValues(reg, enginesOf)
	isolations, _ := knobValues(reg, isolationsOf)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "unique-insert", "--backend", ""}, backendNames(reg)},
		{[]string{"demo", "--backend", ""}, backendNames(reg)},
		{[]string{"run", "unique-insert", "--engine", ""}, engines},
		{[]string{"run", "unique-insert", "--isolation", ""}, isolations},
		{[]string{"run", "unique-insert", "--release", ""}, []string{"gate", "last-byte"}},
		{[]string{"run", "unique-insert", "--expect", ""}, expectWords},
		{[]string{"run", "unique-insert", "--format", ""}, report.Formats()},
		{[]string{"suite", "--format", ""}, report.Formats()},
		{[]string{"report", "--format", ""}, report.Formats()},
		{[]string{"http", "--format", ""}, report.Formats()},
		{[]string{"sql", "--format", ""}, report.Formats()},
	} {
		if got := complete(t, tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("%v completes %v, want %v", tc.args, got, tc.want)
		}
	}
	if !slices.Contains(engines, "aria") || !slices.Contains(isolations, "serializable") {
		t.Fatalf("engines %v, isolations %v: the catalog lost its knobs", engines, isolations)
	}
}

// docFiles are the documents whose commands must exist as written.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "README.md")}, files...)
}

// docCommands returns the racetest command lines of a Markdown document:
// its fenced code blocks (continuation lines joined) and its inline code,
// each cut at a shell comment, pipe, redirection or chaining.
func docCommands(text string) []string {
	var lines []string
	inFence := false
	var pending string
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			if strings.HasSuffix(trimmed, "\\") {
				pending += strings.TrimSuffix(trimmed, "\\") + " "
				continue
			}
			lines = append(lines, pending+trimmed)
			pending = ""
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(line, -1) {
			lines = append(lines, m[1])
		}
	}
	var cmds []string
	for _, l := range lines {
		for _, part := range regexp.MustCompile(`\s(?:#|\||&&|;|>|2>)\s?`).Split(" "+l+" ", -1) {
			part = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "$ "))
			if i := strings.Index(part, "racetest "); i >= 0 && (i == 0 || strings.HasSuffix(part[:i], "$(") || strings.HasSuffix(part[:i], "run: ")) {
				cmds = append(cmds, part[i:])
			}
		}
	}
	return cmds
}

// Every --flag that README.md and docs/*.md show with a racetest command
// exists on that command (its own flags or the root's).
func TestDocsNameOnlyFlagsThatExist(t *testing.T) {
	root, _ := builtinRoot(t)
	flag := regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	checked := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range docCommands(string(b)) {
			words := strings.Fields(line)
			if len(words) < 2 {
				continue
			}
			// The deepest command the words name ("explore sql"), so that
			// a subcommand's own flags count.
			c, _, err := root.Find(words[1:])
			if err != nil || c == root {
				continue // "racetest" alone, or a word that is not a command
			}
			for _, m := range flag.FindAllStringSubmatch(line, -1) {
				name := m[1]
				if c.Flags().Lookup(name) == nil && c.InheritedFlags().Lookup(name) == nil && name != "help" {
					t.Errorf("%s: %q names --%s, which 'racetest %s' does not have", filepath.Base(file), line, name, c.Name())
				}
				checked++
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d flags found in the docs: the parser lost them", checked)
	}
}

// A flag the prose names with commands beside it in parentheses ("`--details`
// (always for `run`)") exists on each of those commands: a reader types
// 'racetest run --details' from that.
func TestDocsNameFlagsWithTheirCommands(t *testing.T) {
	root, _ := builtinRoot(t)
	prose := regexp.MustCompile("`--([a-z][a-z0-9-]*)`[^`()\\n]*\\(([^()\\n]*)\\)")
	word := regexp.MustCompile("`([a-z]+)`")
	checked := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range prose.FindAllStringSubmatch(string(b), -1) {
			for _, w := range word.FindAllStringSubmatch(m[2], -1) {
				c, _, err := root.Find([]string{w[1]})
				if err != nil || c == root {
					continue // a value (`safe`), not a command
				}
				checked++
				if c.Flags().Lookup(m[1]) == nil {
					t.Errorf("%s: %q names --%s beside 'racetest %s', which does not have it", filepath.Base(file), m[0], m[1], w[1])
				}
			}
		}
	}
	t.Logf("%d flags named beside a command", checked)
}

// README's table of backends says each server backend's flag, environment
// variable and default address as the backend declares them.
func TestReadmeBackendTableMatchesTheRegistry(t *testing.T) {
	_, reg := builtinRoot(t)
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := regexp.MustCompile("^\\| `([a-z]+)` \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	for _, be := range connBackends(reg) {
		row, ok := rows[be.Name]
		if !ok {
			t.Errorf("README's backend table has no row for %s", be.Name)
			continue
		}
		for _, want := range []string{"`--" + be.Conn.Flag + "`", "`" + be.Conn.Env + "`", "`" + be.Conn.Default + "`"} {
			if !strings.Contains(row, want) {
				t.Errorf("README's row for %s lacks %s: %s", be.Name, want, row)
			}
		}
	}
}

// Every line of README.md and docs/*.md that lists the output formats (at
// least three of their names, as words) lists every one report knows: a
// format added to report.Formats must reach each list a user reads.
func TestReadmeFormatListsAreWhole(t *testing.T) {
	names := report.Formats()
	word := map[string]*regexp.Regexp{}
	for _, n := range names {
		word[n] = regexp.MustCompile(`(^|[^a-z-])` + n + `([^a-z-]|$)`)
	}
	lists := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			var has, lacks []string
			for _, n := range names {
				if word[n].MatchString(line) {
					has = append(has, n)
				} else {
					lacks = append(lacks, n)
				}
			}
			// A list of formats names several, one after another, in a
			// format flag's line or a list of its values.
			if len(has) < 3 || !regexp.MustCompile(`format|-o\b|render`).MatchString(line) {
				continue
			}
			lists++
			if len(lacks) > 0 {
				t.Errorf("%s:%d lists the formats %v but not %v: %s", f, i+1, has, lacks, line)
			}
		}
	}
	if lists < 4 {
		t.Fatalf("only %d lists of formats found in the docs: the parser lost them", lists)
	}
}

// --expect's help names every form the commands that end in finish accept
// (report.ParseExpect): sql's said "safe, race, or max=N" while lost and
// range= were taken.
func TestExpectHelpNamesEveryForm(t *testing.T) {
	root, _ := builtinRoot(t)
	forms := map[string]string{"safe": "safe", "race": "race", "lost": "lost", "max=N": "max=2", "range=MIN-MAX": "range=0-1"}
	for word, example := range forms {
		if _, err := report.ParseExpect(example); err != nil {
			t.Fatalf("%s: %v", example, err)
		}
		for _, name := range []string{"run", "http", "sql", "redis", "mongo"} {
			f := subcommand(t, root, name).Flags().Lookup("expect")
			if f == nil {
				t.Fatalf("%s has no --expect", name)
			}
			if !strings.Contains(f.Usage, word) {
				t.Errorf("%s --expect help does not name %s: %q", name, word, f.Usage)
			}
		}
	}
}
