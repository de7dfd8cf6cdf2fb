package cmd

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios/builtin"
)

// examplesNotRun are the examples that need what a test cannot give them,
// each with the reason. Every other example of every command's help runs.
// An entry that no longer matches an example fails the test, so the list
// cannot outlive what it excuses.
var examplesNotRun = []struct{ match, why string }{
	{"http://127.0.0.1:8080", "a service of the user's own on port 8080"},
	{"https://localhost:8443", "a service of the user's own on port 8443"},
	{"racetest serve ", "serves until stopped"},
	{"racetest proxy ", "relays until stopped, to the user's database 'shop'"},
	{"./my-service", "the user's own service"},
	{"scripts/cluster.sh", "starts a replica in a container"},
	{"ci/racetest.yaml", "the user's own suite file"},
	{"part-1.json", "the user's shard reports"},
	{"parts/*.json", "the user's shard reports"},
	{"racetest bench", "measures for minutes"},
	{"--step", "waits for Enter on a terminal before each step"},
	{"racetest clean --backend", "drops what other runs left: a test touches only what it made"},
	{"racetest clean --run-id", "drops what another run left: a test touches only what it made"},
}

// exampleServers are the local servers an example needs, found by the
// backend it names.
var exampleServers = map[string]string{
	"postgres": "127.0.0.1:5432",
	"mysql":    "127.0.0.1:3306",
	"redis":    "127.0.0.1:6379",
	"mongo":    "127.0.0.1:27017",
}

// Every Example line of every command's help runs as written, in a scratch
// directory holding what a fresh clone holds (examples/, testdata/), with
// the racetest binary on PATH, against the local servers: a file an example
// names must exist, its flags must parse, and it must reach a verdict (exit
// 0, 1 or 4), never a usage or setup error (2, 3). An example whose server
// is absent skips, or fails under RACETEST_REQUIRE_SERVERS=1.
//
// To keep it short, RACETEST_BURSTS=3 sets the bursts of every example that
// does not give --bursts, and a --bursts an example gives is read as 3.
func TestEveryExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds racetest and runs every example")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "racetest"), "github.com/racetest/racetest")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	io, _, _ := testStreams()
	root := newCmdRoot(&factory{IO: io, Registry: builtin.Registry()})
	used := map[string]bool{}
	commands, ran := 0, 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.Example != "" {
			commands++
			t.Run(c.CommandPath(), func(t *testing.T) {
				ran++
				scratch := t.TempDir()
				for _, d := range []string{"examples", "testdata"} {
					if err := os.Symlink(filepath.Join(repo, d), filepath.Join(scratch, d)); err != nil {
						t.Fatal(err)
					}
				}
				for _, ex := range exampleLines(c.Example) {
					runExample(t, ex, scratch, bin, used)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if ran < commands {
		return // -run chose some commands: the others' entries went unused
	}
	for _, n := range examplesNotRun {
		if !used[n.match] {
			t.Errorf("examplesNotRun: %q matches no example: drop it", n.match)
		}
	}
}

// exampleLines are an Example's commands, each continued line joined.
func exampleLines(example string) []string {
	joined := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(example, "")
	var lines []string
	for _, l := range strings.Split(joined, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

var burstsFlag = regexp.MustCompile(`--bursts[ =]\d+`)

func runExample(t *testing.T, ex, dir, bin string, used map[string]bool) {
	t.Helper()
	for _, n := range examplesNotRun {
		if strings.Contains(ex, n.match) {
			used[n.match] = true
			t.Logf("not run (%s): %s", n.why, ex)
			return
		}
	}
	for _, name := range exampleBackends(ex) {
		addr := exampleServers[name]
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			if testenv.Required() {
				t.Fatalf("%s: no %s at %s, and RACETEST_REQUIRE_SERVERS=1 requires it: %v", ex, name, addr, err)
			}
			t.Logf("skipped, no %s at %s (set RACETEST_REQUIRE_SERVERS=1 to make this a failure): %s", name, addr, ex)
			return
		}
		conn.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", burstsFlag.ReplaceAllString(ex, "--bursts 3"))
	sh.Dir = dir
	sh.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"RACETEST_BURSTS=3", "GITHUB_STEP_SUMMARY="+filepath.Join(dir, "summary.md"))
	start := time.Now()
	out, err := sh.CombinedOutput()
	code := sh.ProcessState.ExitCode()
	t.Logf("exit %d in %s: %s", code, time.Since(start).Round(time.Millisecond), ex)
	switch code {
	case exitOK, exitViolated, exitInconclusive:
	default:
		t.Errorf("%s\nexit %d (%v), want a verdict (0, 1 or 4):\n%s", ex, code, err, tail(string(out), 2000))
	}
}

// exampleBackends are the servers an example names: by -b, --backend or
// --backends, by its verb (redis, mongo), and both SQL servers for matrix.
func exampleBackends(ex string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?:-b|--backends?)[ =]([a-z,]+)`).FindAllStringSubmatch(ex, -1) {
		names = append(names, strings.Split(m[1], ",")...)
	}
	switch {
	case strings.HasPrefix(ex, "racetest redis "):
		names = append(names, "redis")
	case strings.HasPrefix(ex, "racetest mongo "):
		names = append(names, "mongo")
	case strings.HasPrefix(ex, "racetest matrix"):
		names = append(names, "postgres", "mysql")
	}
	var servers []string
	for _, n := range names {
		if _, ok := exampleServers[n]; ok {
			servers = append(servers, n)
		}
	}
	return servers
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
