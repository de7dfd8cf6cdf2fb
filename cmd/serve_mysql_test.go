package cmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/mysqlstore"
)

// run --processes on MariaDB/MySQL with the real binary: the replica
// processes attach to the tables the parent prepared, the parent counts
// their rows (one per process for memory-set), and the run leaves no table
// of its run id behind.
func TestRunProcessesMySQL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds racetest")
	}
	probe := scenarios.Params{RunID: scenarios.NewRunID(), Conn: testenv.Conns("mysql")}
	st, err := mysqlstore.Open(context.Background(), probe)
	if err != nil {
		testenv.Unavailable(t, mysqlstore.Name, err)
	}
	defer st.Close()

	dir := t.TempDir()
	exe := filepath.Join(dir, "racetest")
	build := exec.Command("go", "build", "-o", exe, "github.com/racetest/racetest")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	// The replicas run through a wrapper that notes their arguments: the
	// run id they were given names the tables to look for afterwards.
	argLog := filepath.Join(dir, "args")
	wrapper := filepath.Join(dir, "racetest-logged")
	script := "#!/bin/sh\necho \"$@\" >> '" + argLog + "'\nexec '" + exe + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	old := serveExecutable
	serveExecutable = func() (string, error) { return wrapper, nil }
	defer func() { serveExecutable = old }()

	runIDRE := regexp.MustCompile(`--run-id (\S+)`)
	failedRE := regexp.MustCompile(`(\d+) of \d+ attempts failed with an error`)
	for _, c := range []struct {
		replicas, processes string
		effect              string
		code                int
	}{
		{"1", "1 process", "1/1/1", exitOK},
		{"3", "3 processes", "3/3/3", exitViolated},
	} {
		os.Remove(argLog)
		io, out, errOut := testStreams()
		f := &factory{IO: io, Registry: builtin.Registry()}
		root := newCmdRoot(f)
		root.SetArgs([]string{"run", "memory-set", "-b", "mysql", "--processes", "--replicas", c.replicas,
			"-n", "6", "--bursts", "4", "--timeline=false"})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := root.ExecuteContext(ctx)
		cancel()
		printError(io, err)
		if code := exitCode(err); code != c.code || !strings.Contains(out.String(), c.effect) || !strings.Contains(out.String(), c.processes) {
			t.Errorf("--replicas %s: exit %d, want %d and effects %s from %s\n%s%s", c.replicas, code, c.code, c.effect, c.processes, out, errOut)
		}
		if m := failedRE.FindStringSubmatch(out.String()); m == nil || m[1] != "0" {
			t.Errorf("--replicas %s: want every attempt to reach the scenario in the replicas:\n%s", c.replicas, out)
		}
		logged, err := os.ReadFile(argLog)
		if err != nil {
			t.Fatalf("--replicas %s: no replica was started: %v", c.replicas, err)
		}
		ids := map[string]bool{}
		for _, m := range runIDRE.FindAllStringSubmatch(string(logged), -1) {
			ids[m[1]] = true
		}
		if len(ids) != 1 {
			t.Fatalf("--replicas %s: the replicas were given run ids %v, want one", c.replicas, ids)
		}
		for id := range ids {
			prefix := scenarios.Params{RunID: id}.Prefix()
			var left int
			if err := st.DB().QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE ?",
				strings.ReplaceAll(prefix, "_", `\_`)+"%").Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Errorf("--replicas %s: %d tables named %s* are left after the run", c.replicas, left, prefix)
			}
		}
	}
}
