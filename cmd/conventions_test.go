package cmd

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/spf13/cobra"
)

// execIO runs racetest with args on the given test streams.
func execIO(t *testing.T, io *ioStreams, reg *scenarios.Registry, args ...string) int {
	t.Helper()
	root := newCmdRoot(&factory{IO: io, Registry: reg})
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := root.ExecuteContextC(ctx)
	printCommandError(io, err, c)
	return exitCode(err)
}

func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// The colour decision, in its documented order: an explicit --color, then
// NO_COLOR, then FORCE_COLOR / CLICOLOR_FORCE, then the terminal.
func TestColourPrecedence(t *testing.T) {
	for _, c := range []struct {
		mode string
		env  map[string]string
		tty  bool
		want bool
	}{
		{"auto", nil, true, true},
		{"auto", nil, false, false},
		{"auto", map[string]string{"TERM": "dumb"}, true, false},
		{"auto", map[string]string{"NO_COLOR": "1"}, true, false},
		{"auto", map[string]string{"NO_COLOR": ""}, true, true}, // no-color.org: an empty value does not count
		{"auto", map[string]string{"FORCE_COLOR": "1"}, false, true},
		{"auto", map[string]string{"CLICOLOR_FORCE": "1"}, false, true},
		{"auto", map[string]string{"FORCE_COLOR": "0"}, false, false},
		{"auto", map[string]string{"CLICOLOR_FORCE": "0"}, false, false},
		{"auto", map[string]string{"FORCE_COLOR": "1", "TERM": "dumb"}, false, true},
		{"auto", map[string]string{"NO_COLOR": "1", "FORCE_COLOR": "1"}, false, false}, // NO_COLOR beats FORCE_COLOR
		{"auto", map[string]string{"NO_COLOR": "1", "CLICOLOR_FORCE": "1"}, true, false},
		{"always", map[string]string{"NO_COLOR": "1"}, false, true}, // the flag beats NO_COLOR
		{"never", map[string]string{"FORCE_COLOR": "1"}, true, false},
		{"never", nil, true, false},
		{"always", nil, false, true},
	} {
		if got := useColor(c.mode, envOf(c.env), c.tty); got != c.want {
			t.Errorf("--color %s, env %v, tty %v: colour %v, want %v", c.mode, c.env, c.tty, got, c.want)
		}
	}
}

// --color is on every command, and decides what reaches the output.
func TestColourFlagOnEveryCommand(t *testing.T) {
	io, _, _ := testStreams()
	root := newCmdRoot(&factory{IO: io, Registry: memoryOnly()})
	for _, c := range allCommands(root) {
		if c.Flag("color") == nil {
			t.Errorf("%s has no --color", c.CommandPath())
		}
	}
	run := []string{"run", "check-then-write", "-n", "4", "--bursts", "5", "--expect", "race"}
	for _, c := range []struct {
		name string
		tty  bool
		env  map[string]string
		args []string
		want bool
	}{
		{"pipe", false, nil, nil, false},
		{"terminal", true, nil, nil, true},
		{"terminal, NO_COLOR", true, map[string]string{"NO_COLOR": "1"}, nil, false},
		{"pipe, FORCE_COLOR", false, map[string]string{"FORCE_COLOR": "1"}, nil, true},
		{"pipe, CLICOLOR_FORCE", false, map[string]string{"CLICOLOR_FORCE": "1"}, nil, true},
		{"NO_COLOR and --color always", false, map[string]string{"NO_COLOR": "1"}, []string{"--color", "always"}, true},
		{"terminal, FORCE_COLOR and --color never", true, map[string]string{"FORCE_COLOR": "1"}, []string{"--color", "never"}, false},
		{"the flag before the command", false, nil, []string{"--color=always"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			io, out, errOut := testStreams()
			io.OutTTY, io.Env = c.tty, envOf(c.env)
			args := append(append([]string{}, run...), c.args...)
			if c.name == "the flag before the command" {
				args = append(append([]string{}, c.args...), run...)
			}
			if code := execIO(t, io, memoryOnly(), args...); code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := strings.Contains(out.String(), "\x1b["); got != c.want {
				t.Errorf("colour %v, want %v:\n%s", got, c.want, out)
			}
		})
	}
	for _, args := range [][]string{{"list", "--color", "sometimes"}, {"run", "check-then-write", "--color", ""}} {
		io, _, errOut := testStreams()
		if code := execIO(t, io, memoryOnly(), args...); code != exitUsage || !strings.Contains(errOut.String(), "want auto, always or never") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
}

// -q keeps the verdict lines, -v adds a line per burst; both on run,
// demo, suite and http, and not together.
func TestQuietAndVerbose(t *testing.T) {
	srv := httptest.NewServer(&counter{writes: map[string]int{}})
	defer srv.Close()
	suiteFile := writeSuite(t, "defaults: {attempts: 4, bursts: 6}\ncases:\n  - {scenario: check-then-write, expect: race}\n  - {scenario: unique-insert}\n")
	verdictLine := regexp.MustCompile(`^(ok   |FAIL |WARN |ERROR) \S.* on memory: |^(ok   |FAIL |WARN |ERROR) POST http://`)
	for _, c := range []struct {
		name   string
		args   []string
		cases  int
		bursts int
	}{
		{"run", []string{"run", "check-then-write", "-n", "4", "--bursts", "7", "--expect", "race"}, 1, 7},
		{"demo", []string{"demo", "-n", "4", "--bursts", "3"}, 0, 0},
		{"suite", []string{"suite", suiteFile}, 2, 12},
		{"http", []string{"http", "POST", srv.URL + "/?k={{.Token}}", "-n", "4", "--bursts", "5",
			"--effects", "http:" + srv.URL + "/count?k={{.Token}}", "--expect", "race"}, 1, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := memoryOnly()
			if c.name == "demo" {
				reg = builtin.Registry()
				c.cases = len(demoRows(reg))
				c.bursts = 0
				for _, p := range demoRows(reg) {
					c.bursts += min(3, p)
				}
			}
			// A few bursts on a loaded machine may miss an expectation
			// (exit 1) or prove nothing (exit 4): the output's shape is the
			// test here, the exit codes have theirs.
			okCode := func(code int) bool { return code == exitOK || code == exitViolated || code == exitInconclusive }
			io, out, errOut := testStreams()
			code := execIO(t, io, reg, append(c.args, "-q")...)
			if !okCode(code) {
				t.Fatalf("-q: exit %d: %s", code, errOut)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != c.cases {
				t.Errorf("-q: %d lines for %d cases:\n%s", len(lines), c.cases, out)
			}
			for _, l := range lines {
				if !verdictLine.MatchString(l) {
					t.Errorf("-q: %q is not a verdict line", l)
				}
			}
			// Only the error that sets the exit code may reach stderr.
			if e := errOut.String(); e != "" && (code == exitOK || strings.Count(e, "\n") != 1 || !strings.HasPrefix(e, "racetest: ")) {
				t.Errorf("-q: stderr chatter: %q", e)
			}

			io, out, errOut = testStreams()
			if code := execIO(t, io, reg, append(c.args, "-v")...); !okCode(code) {
				t.Fatalf("-v: exit %d: %s", code, errOut)
			}
			if n := regexp.MustCompile(`(?m)^  burst +\d+  effects +\d+ \(allowed [\d-]+\)  `).FindAllStringIndex(out.String(), -1); len(n) != c.bursts {
				t.Errorf("-v: %d burst lines, want %d:\n%s", len(n), c.bursts, out)
			}
			io, out, _ = testStreams()
			execIO(t, io, reg, c.args...)
			if strings.Contains(out.String(), "  burst 0  effects") {
				t.Errorf("burst lines without -v:\n%s", out)
			}

			io, _, errOut = testStreams()
			if code := execIO(t, io, reg, append(c.args, "-q", "-v")...); code != exitUsage || !strings.Contains(errOut.String(), "contradict") {
				t.Errorf("-q -v: exit %d, %q", code, errOut)
			}
		})
	}
	for _, cmd := range []string{"list", "explain", "report", "bench"} {
		io, _, _ := testStreams()
		root := newCmdRoot(&factory{IO: io, Registry: memoryOnly()})
		c, _, _ := root.Find([]string{cmd})
		if c.Flags().Lookup("quiet") != nil {
			t.Errorf("%s has -q, which it would not honour", cmd)
		}
	}
}

// demoRows is the bursts each demo row of reg fires at most (0: no cap).
func demoRows(reg *scenarios.Registry) []int {
	var caps []int
	for _, s := range reg.Scenarios() {
		if !has(reg.BackendsOf(s.Name), "memory") {
			continue
		}
		for _, dc := range s.Demo {
			c := dc.Bursts
			if c == 0 {
				c = 1 << 30
			}
			caps = append(caps, c)
		}
	}
	return caps
}

// 'racetest version' and 'racetest --version' print one line, the same,
// and it names the commit wherever the build recorded one.
func TestVersionFromTheBuild(t *testing.T) {
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		io, out, errOut := testStreams()
		if code := execIO(t, io, memoryOnly(), args...); code != exitOK {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		outs = append(outs, out.String())
	}
	if outs[0] != outs[1] || !strings.HasPrefix(outs[0], "racetest ") || strings.Count(outs[0], "\n") != 1 {
		t.Errorf("version %q and --version %q differ, or are not one line", outs[0], outs[1])
	}
	// -v is --verbose where it exists; on racetest itself it is nothing.
	if io, _, _ := testStreams(); execIO(t, io, memoryOnly(), "-v") != exitUsage {
		t.Error("racetest -v is accepted: -v means --verbose on run, demo, suite and http, not --version")
	}

	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	rev := "c70bb7ce32e5a3e2b9e265a146185c6910d99777"
	for _, c := range []struct {
		name    string
		ldflags string
		bi      *debug.BuildInfo
		word    string
		line    []string
	}{
		{"go install @v1.2.3", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			"v1.2.3", []string{"racetest v1.2.3 (go1.26.8 "}},
		{"a build in a clone", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201020022-c70bb7ce32e5"},
			Settings: settings("vcs.revision", rev, "vcs.time", "2026-12-01T02:00:22Z", "vcs.modified", "false")},
			"v0.0.0-20261201020022-c70bb7ce32e5", []string{"commit c70bb7ce32e5, 2026-12-01T02:00:22Z, go1.26.8"}},
		{"a dirty devel build", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", rev, "vcs.time", "2026-12-01T02:00:22Z", "vcs.modified", "true")},
			"devel-c70bb7ce32e5-dirty", []string{"racetest devel-c70bb7ce32e5-dirty (commit c70bb7ce32e5, 2026-12-01T02:00:22Z, modified, go1.26.8"}},
		{"-ldflags wins", "v9.9.9", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v9.9.9", []string{"racetest v9.9.9 ("}},
		{"nothing recorded", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev", []string{"racetest dev ("}},
		{"no build info", "", nil, "dev", []string{"racetest dev ("}},
	} {
		if got := versionOf(c.ldflags, c.bi); got != c.word {
			t.Errorf("%s: version %q, want %q", c.name, got, c.word)
		}
		line := versionLine(c.ldflags, c.bi)
		for _, want := range c.line {
			if !strings.Contains(line, want) {
				t.Errorf("%s: %q lacks %q", c.name, line, want)
			}
		}
	}
}

// allCommands is every command a user can run, the root included, but not
// cobra's help and completion, nor a help topic ('racetest help
// environment'), which runs nothing.
func allCommands(root *cobra.Command) []*cobra.Command {
	all := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || !c.Runnable() {
			continue
		}
		all = append(all, c)
	}
	return all
}

// Every command's help shows examples and its exit codes, each code one
// that exit.go defines.
func TestEveryHelpHasExamplesAndExitCodes(t *testing.T) {
	io, _, _ := testStreams()
	root := newCmdRoot(&factory{IO: io, Registry: builtin.Registry()})
	for _, c := range allCommands(root) {
		name := strings.TrimPrefix(c.CommandPath(), "racetest ")
		t.Run(name, func(t *testing.T) {
			io, out, errOut := testStreams()
			args := []string{"--help"}
			if c != root {
				args = []string{name, "--help"}
			}
			if code := execIO(t, io, builtin.Registry(), args...); code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			help := out.String()
			ex := regexp.MustCompile(`(?m)^Examples:\n  racetest \S`)
			if !ex.MatchString(help) {
				t.Errorf("no examples:\n%s", help)
			}
			m := regexp.MustCompile(`(?s)\nExit codes:\n((?:  \d+ +\S[^\n]*\n?)+)`).FindStringSubmatch(help)
			if m == nil {
				t.Fatalf("no exit codes:\n%s", help)
			}
			codes := regexp.MustCompile(`(?m)^  (\d+) `).FindAllStringSubmatch(m[1], -1)
			if len(codes) < 2 || codes[0][1] != "0" {
				t.Errorf("exit codes %q: want 0 first and at least one failure", m[1])
			}
			for _, code := range codes {
				switch code[1] {
				case "0", "1", "2", "3", "4", "130":
				default:
					t.Errorf("exit code %s is not one exit.go defines", code[1])
				}
			}
			if strings.Contains(c.Long, "Exit codes:") {
				t.Errorf("exit codes written twice: in Long and in the help's section")
			}
		})
	}
}

// Each command explain offers under "Try it" runs green on the memory
// backend: what the story says is what the run shows.
func TestExplainTryItRunsGreen(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario's commands")
	}
	reg := builtin.Registry()
	for _, s := range reg.Scenarios() {
		io, out, _ := testStreams()
		if code := execIO(t, io, reg, "explain", s.Name); code != exitOK {
			t.Fatalf("explain %s: exit %d", s.Name, code)
		}
		_, try, ok := strings.Cut(out.String(), "\nTry it:\n")
		if !ok {
			t.Fatalf("explain %s has no Try it:\n%s", s.Name, out)
		}
		var cmds []string
		for _, l := range strings.Split(strings.TrimSpace(try), "\n") {
			if l = strings.TrimSpace(l); !strings.HasPrefix(l, "(needs a ") {
				cmds = append(cmds, l)
			}
		}
		if len(cmds) < max(len(s.Demo), 1) {
			t.Errorf("explain %s: %d commands for %d demo rows", s.Name, len(cmds), len(s.Demo))
		}
		for _, line := range cmds {
			args := strings.Fields(line)
			if args[0] != "racetest" || args[1] != "run" {
				t.Errorf("explain %s: %q is not a racetest run command", s.Name, line)
				continue
			}
			onServer := has(args, "--backend") && !has(args, "memory")
			if !onServer {
				// Short bursts, fewer attempts: the memory store needs no more
				// to show what the story says.
				if !has(args, "--bursts") {
					args = append(args, "--bursts", "20")
				}
				args = append(args, "-n", "8", "-q")
			}
			t.Run(strings.Join(args[2:], " "), func(t *testing.T) {
				if onServer {
					// A scenario the embedded store cannot run needs its
					// servers (a replica, a cluster): CI's cluster step runs it.
					t.Skipf("%s does not run on the memory backend", s.Name)
				}
				io, out, errOut := testStreams()
				if code := execIO(t, io, reg, args[1:]...); code != exitOK {
					t.Errorf("exit %d:\n%s%s", code, out, errOut)
				}
			})
		}
	}
}

var trailingSpace = regexp.MustCompile(`(?m)[ \t]+$`)

// No line of any human output ends in spaces: tables, details, timelines,
// burst lines, help, Markdown.
func TestNoTrailingSpaces(t *testing.T) {
	srv := httptest.NewServer(&counter{writes: map[string]int{}})
	defer srv.Close()
	dir := t.TempDir()
	suiteFile := writeSuite(t, "defaults: {attempts: 4, bursts: 6}\ncases:\n  - {scenario: check-then-write, expect: race}\n  - {scenario: memory-set, replicas: 3, expect: race}\n  - {name: ttl, scenario: ttl-lease}\n")
	md := filepath.Join(dir, "r.md")
	httpArgs := []string{"http", "POST", srv.URL + "/?k={{.Token}}", "-n", "4", "--bursts", "5",
		"--effects", "http:" + srv.URL + "/count?k={{.Token}}", "--expect", "race"}
	for _, args := range [][]string{
		{"demo", "-n", "4", "--bursts", "5"},
		{"demo", "-n", "4", "--bursts", "5", "--details"},
		{"demo", "-n", "4", "--bursts", "3", "-v", "--details"},
		{"demo", "-n", "4", "--bursts", "3", "-q"},
		{"demo", "-n", "4", "--bursts", "3", "-o", "markdown"},
		{"run", "check-then-write", "-n", "6", "--bursts", "10", "--expect", "race"},
		{"run", "check-then-write", "-n", "6", "--bursts", "10", "--expect", "race", "-v"},
		{"run", "check-then-write", "-n", "6", "--bursts", "10", "--expect", "race", "-q"},
		{"run", "lease-pause", "-n", "4", "--bursts", "4", "--expect", "race"},
		{"run", "conditional-update", "-n", "6", "--bursts", "10", "-o", "markdown"},
		{"suite", suiteFile, "--markdown", md, "--timeline"},
		{"suite", suiteFile, "--list"},
		{"suite", suiteFile, "-v"},
		append(append([]string{}, httpArgs...), "-v"),
		httpArgs,
		{"list"}, {"explain", "reward-payout"}, {"version"}, {"run", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			for _, width := range []int{80, 120} {
				io, out, errOut := testStreams()
				io.OutTTY, io.TermWidth = true, width
				io.NoColor = true
				// A few bursts on a loaded machine may miss an expectation
				// (exit 1) or prove nothing (exit 4); the text is the test.
				code := execIO(t, io, builtin.Registry(), args...)
				if code != exitOK && code != exitViolated && code != exitInconclusive {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				text := out.String() + errOut.String()
				if args[0] == "suite" && has(args, "--markdown") {
					b, err := os.ReadFile(md)
					if err != nil {
						t.Fatal(err)
					}
					text += string(b)
				}
				for _, l := range trailingSpace.FindAllStringIndex(text, -1) {
					start := strings.LastIndexByte(text[:l[0]], '\n') + 1
					t.Errorf("%d columns: trailing space in %q", width, text[start:l[1]])
				}
			}
		})
	}
}
