package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/racetest/racetest/scenarios/builtin"
)

// An explicitly empty connection flag is an error on every command that
// has one, not a silent switch to the default server.
func TestEmptyConnectionFlagIsAnError(t *testing.T) {
	commands := map[string][]string{
		"run":     {"run", "check-then-write"},
		"demo":    {"demo"},
		"suite":   {"suite", writeSuite(t, tinySuite)},
		"serve":   {"serve", "check-then-write"},
		"bench":   {"bench", "--quick"},
		"explore": {"explore", "check-then-write"},
		"replay":  {"replay", "check-then-write", "--schedule", "A1 B1 A2 B2"},
	}
	checked := 0
	for name, args := range commands {
		for _, flag := range []string{"redis-url", "mysql-dsn", "postgres-url", "mongo-uri"} {
			root := newCmdRoot(&factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()})
			sub, _, err := root.Find(args)
			if err != nil || sub.Flags().Lookup(flag) == nil {
				continue
			}
			_, errOut, code := execCmd(t, false, append(args, "--"+flag, "")...)
			if code != exitUsage || !strings.Contains(errOut, "--"+flag+" was given an empty value") {
				t.Errorf("%s --%s '': exit %d, want 2\n%s", name, flag, code, errOut)
			}
			checked++
		}
	}
	if checked < 19 {
		t.Errorf("checked %d command and flag pairs, want 19", checked)
	}
}

// A connection string that cannot be parsed is bad input: exit 2, as the
// README says, before any server is asked.
func TestMalformedConnectionIsAUsageError(t *testing.T) {
	for backend, flag := range map[string]string{
		"postgres": "--postgres-url=postgres://%zz@:::/",
		"redis":    "--redis-url=redis://h:notaport",
		"mysql":    "--mysql-dsn=root@tcp(127.0.0.1:3306",
		"mongo":    "--mongo-uri=mongodb://",
	} {
		io, _, errOut := testStreams()
		root := newCmdRoot(&factory{IO: io, Registry: builtin.Registry()})
		root.SetArgs([]string{"run", "conditional-update", "-b", backend, flag, "-n", "2", "--bursts", "1"})
		err := root.ExecuteContext(context.Background())
		printError(io, err)
		if code := exitCode(err); code != exitUsage {
			t.Errorf("%s %s: exit %d, want 2\n%s", backend, flag, code, errOut)
		}
	}
	file := writeSuite(t, "defaults:\n  connections: {postgres: 'postgres://%zz@:::/'}\ncases:\n  - {scenario: conditional-update, backend: postgres, attempts: 2, bursts: 1}\n")
	_, errOut, code := execSuite(t, builtin.Registry(), nil, "suite", file)
	if code != exitUsage || !strings.Contains(errOut, "cannot parse connection string") {
		t.Errorf("suite with a malformed connection: exit %d, want 2\n%s", code, errOut)
	}
}

func TestCompletionKnowsItsShells(t *testing.T) {
	_, errOut, code := execCmd(t, false, "completion", "nosuch")
	if code != exitUsage || !strings.Contains(errOut, `unknown shell "nosuch": racetest knows bash, fish, powershell, zsh`) {
		t.Errorf("completion nosuch: exit %d\n%s", code, errOut)
	}
	out, _, code := execCmd(t, false, "completion", "bash")
	if code != exitOK || !strings.Contains(out, "bash completion") {
		t.Errorf("completion bash: exit %d\n%.200s", code, out)
	}
}

// A burst that cannot fit in memory is refused with exit 2, saying the
// limit and why; one that fits runs.
func TestAttemptsPastMemoryAreRefused(t *testing.T) {
	old := availableMemory
	defer func() { availableMemory = old }()
	availableMemory = func() (int64, bool) { return 1 << 30, true }
	// Half of 1 GiB at 6 KiB an attempt.
	const limit = "87381 attempts or fewer"
	for _, args := range [][]string{
		{"run", "unique-insert", "-n", "100000000"},
		{"run", "unique-insert", "-n", "87382"},
		{"demo", "-n", "1000000"},
		{"suite", writeSuite(t, "cases:\n  - {scenario: unique-insert, attempts: 100000000}\n")},
	} {
		_, errOut, code := execCmd(t, false, args...)
		if code != exitUsage || !strings.Contains(errOut, limit) || !strings.Contains(errOut, "1.0 GiB of memory is available") {
			t.Errorf("%v: exit %d, want 2 and %q\n%s", args, code, limit, errOut)
		}
	}
	availableMemory = func() (int64, bool) { return 0, false }
	_, errOut, code := execCmd(t, false, "run", "unique-insert", "-n", "1000000")
	if code != exitUsage || !strings.Contains(errOut, "4.0 GiB of memory is assumed") {
		t.Errorf("unknown memory: exit %d\n%s", code, errOut)
	}
	availableMemory = func() (int64, bool) { return 1 << 30, true }
	if _, errOut, code := execCmd(t, false, "run", "unique-insert", "-n", "40", "--bursts", "2"); code != exitOK && code != exitInconclusive {
		t.Errorf("-n 40: exit %d\n%s", code, errOut)
	}
}

// The first Ctrl-C cancels; the second quits at once, naming what the
// runs under way may leave and the command that removes it.
func TestSecondInterruptQuitsAtOnce(t *testing.T) {
	end := inFlight.begin(builtin.Registry(), "postgres", "ab12cd")
	defer end()
	defer inFlight.begin(builtin.Registry(), "memory", "zz99")() // in-process: nothing to name
	sigs := make(chan os.Signal, 2)
	cancelled := make(chan struct{})
	exited := make(chan int, 1)
	var out syncBuffer
	go watchInterrupts(sigs, func() { close(cancelled) }, &out, func(code int) { exited <- code })
	sigs <- os.Interrupt
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Ctrl-C did not cancel the run")
	}
	select {
	case code := <-exited:
		t.Fatalf("the first Ctrl-C exited (%d)", code)
	case <-time.After(50 * time.Millisecond):
	}
	sigs <- syscall.SIGTERM
	select {
	case code := <-exited:
		if code != exitInterrupted {
			t.Errorf("exit %d, want 130", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second Ctrl-C did not end racetest")
	}
	msg := out.String()
	for _, want := range []string{
		"Ctrl-C again to quit at once",
		"the tables named racetest_ab12cd_* may remain on postgres",
		"racetest clean --backend postgres --run-id ab12cd --dry-run",
		"with the run's --postgres-url",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "zz99") {
		t.Errorf("the message names a memory run:\n%s", msg)
	}
}

// --keep names what it kept, in the table and in the JSON.
func TestKeepNamesTheKeptObjects(t *testing.T) {
	reg := memoryOnly()
	// A server backend's name (memoryOnly declares it) on the embedded
	// store: the note depends on the backend, and the store leaves nothing
	// behind.
	fac, err := reg.Factory("unique-insert", "memory")
	if err != nil {
		t.Fatal(err)
	}
	reg.Register("unique-insert", "postgres", fac)
	for _, format := range []string{"table", "json"} {
		io, out, errOut := testStreams()
		root := newCmdRoot(&factory{IO: io, Registry: reg})
		root.SetArgs([]string{"run", "unique-insert", "-b", "postgres", "--keep", "-n", "4", "--bursts", "2", "-o", format})
		err := root.ExecuteContext(context.Background())
		if code := exitCode(err); code != exitOK && code != exitInconclusive {
			t.Fatalf("%s: exit %d: %v\n%s", format, code, err, errOut)
		}
		// The table wraps notes to its width: read it as one line of words.
		text := strings.Join(strings.Fields(out.String()), " ")
		if format == "json" {
			var doc struct {
				Runs []struct {
					Settings map[string]string `json:"settings"`
					Notes    []string          `json:"notes"`
				} `json:"runs"`
			}
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Runs) != 1 {
				t.Fatalf("json: %v\n%s", err, out)
			}
			text = strings.Join(doc.Runs[0].Notes, "\n")
		}
		if !strings.Contains(text, "--keep: kept the tables named racetest_") || !strings.Contains(text, "racetest clean --backend postgres --run-id ") {
			t.Errorf("%s does not name the kept tables:\n%s", format, text)
		}
	}
	out, _, _ := execCmd(t, false, "run", "unique-insert", "--keep", "-n", "4", "--bursts", "1", "-o", "json")
	if !strings.Contains(out, "the memory backend keeps the run's state in this process") {
		t.Errorf("--keep on memory does not say that nothing outlives the process:\n%s", out)
	}
	// Without --keep, nothing was kept, and no note says so.
	out, _, _ = execCmd(t, false, "run", "unique-insert", "-n", "4", "--bursts", "1", "-o", "json")
	if !strings.Contains(out, `"runs"`) || strings.Contains(out, "--keep") {
		t.Errorf("a run without --keep speaks of --keep:\n%s", out)
	}
}

// Case names reach the terminal with control characters and bidi
// overrides escaped; the JSON report keeps them as written.
func TestCaseNamesArePrintedEscaped(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "r.json")
	file := writeSuite(t, "cases:\n  - {name: \"pay\\u202Eevil\\e[2J\\0\", scenario: unique-insert, attempts: 4, bursts: 2}\n")
	out, errOut, _ := execSuite(t, memoryOnly(), nil, "suite", file, "--json", js)
	for _, bad := range []string{"\u202e", "\x1b[2J", "\x00"} {
		if strings.Contains(out, bad) || strings.Contains(errOut, bad) {
			t.Errorf("%q reached the terminal:\n%s\n%s", bad, out, errOut)
		}
	}
	if !strings.Contains(out, `pay\u202eevil\x1b[2J\x00`) || !strings.Contains(errOut, `pay\u202eevil\x1b[2J\x00`) {
		t.Errorf("the escaped name is not shown:\n%s\n%s", out, errOut)
	}
	b, _ := os.ReadFile(js)
	var doc struct {
		Runs []struct {
			Name string `json:"name"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Runs) != 1 || doc.Runs[0].Name != "pay\u202eevil\x1b[2J\x00" {
		t.Errorf("the JSON report does not keep the name as written: %v %s", err, bytes.TrimSpace(b))
	}
}

// A killed Redis run leaves thousands of keys: 'clean' names ten and
// counts the rest, so that its line stays readable.
func TestCleanListsAFewObjects(t *testing.T) {
	var many []string
	for i := range 2944 {
		many = append(many, fmt.Sprintf("racetest_d0c5de33_b%d:effects", i))
	}
	got := listed(many)
	if !strings.HasSuffix(got, "and 2934 more (2944 in all)") || strings.Count(got, "racetest_") != listedMax {
		t.Errorf("listed(2944 keys) = %q", got)
	}
	if got := listed(many[:3]); got != strings.Join(many[:3], ", ") {
		t.Errorf("listed(3 keys) = %q, want all three", got)
	}
}

// A connection's default comes from its RACETEST_* variable, and --help
// shows it: with its password hidden, as every other output does.
func TestHelpHidesTheEnvironmentsPasswords(t *testing.T) {
	t.Setenv("RACETEST_MYSQL_DSN", "u:pw-mysql@tcp(127.0.0.1:3306)/test")
	t.Setenv("RACETEST_POSTGRES_URL", "postgres://u:pw-pg@127.0.0.1:5432/test")
	t.Setenv("RACETEST_REDIS_URL", "redis://:pw-redis@127.0.0.1:6379")
	t.Setenv("RACETEST_MONGO_URI", "mongodb://u:pw-mongo@127.0.0.1:27017/")
	for _, verb := range []string{"run", "sql", "http", "suite", "clean"} {
		out, stderr, code := execCmd(t, false, verb, "--help")
		if code != exitOK || !strings.Contains(out, "--mysql-dsn") {
			t.Fatalf("%s --help: exit %d\n%s%s", verb, code, out, stderr)
		}
		if strings.Contains(out+stderr, "pw-") {
			t.Errorf("%s --help shows a password from the environment:\n%s", verb, out)
		}
	}
}
