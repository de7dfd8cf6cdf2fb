package cmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/release/bench"
	"github.com/racetest/racetest/scenarios/builtin"
)

func TestBenchFlagsParse(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *benchOptions
	c := newCmdBench(f, func(_ context.Context, o *benchOptions) error { got = o; return nil })
	c.SetArgs([]string{"--backends", "redis,postgres", "-n", "2,16", "--bursts", "40", "--chunk", "10", "--windows", "5us,1ms"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Backends, []string{"redis", "postgres"}) || !slices.Equal(got.Config.Attempts, []int{2, 16}) ||
		got.Config.Bursts != 40 || got.Config.Chunk != 10 ||
		!slices.Equal(got.Windows, []time.Duration{5 * time.Microsecond, time.Millisecond}) {
		t.Errorf("parsed options = %+v", got)
	}
}

func TestBenchDefaults(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *benchOptions
	c := newCmdBench(f, func(_ context.Context, o *benchOptions) error { got = o; return nil })
	c.SetArgs(nil)
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Backends, bench.DefaultBackends) || !slices.Equal(got.Config.Attempts, bench.DefaultAttempts) ||
		got.Config.Bursts != bench.DefaultBursts || got.Config.Chunk != bench.DefaultChunk {
		t.Errorf("defaults = %+v", got)
	}
}

func TestBenchBadInputIsAUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--backends", "memory"},
		{"bench", "--backends", "http-memcached"},
		{"bench", "--backends", "http", "--modes", "auto,user-jdbc"},
		{"bench", "-n", "1"},
		{"bench", "--bursts", "0"},
		{"bench", "--windows", "0s"},
		{"bench", "--modes", "last-byte,user-jdbc"},
		{"bench", "--quick", "--modes", "user-pgx"},
		{"bench", "--backends", "redis", "--redis-url", "redis://:s3cret@127.0.0.1:6379/x"},
		{"bench", "--backends", "http-redis", "--redis-url", "redis://:s3cret@127.0.0.1:6379/x"},
	} {
		_, stderr, code := execCmd(t, false, args...)
		if code != exitUsage || !strings.Contains(stderr, "racetest: ") {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
		if slices.Contains(args, "--redis-url") &&
			(!strings.Contains(stderr, "cannot use the URL redis://:xxxxx@127.0.0.1:6379/x") || strings.Contains(stderr, "s3cret")) {
			t.Errorf("%q: stderr %q; want the URL refused, its password hidden", args, stderr)
		}
	}
}

// A bench where no server answers says, per backend, why, one to a line,
// and exits as a setup error.
func TestBenchNoServerAnswered(t *testing.T) {
	_, stderr, code := execCmd(t, false, "bench", "--backends", "redis,mysql", "-n", "2",
		"--redis-url", "redis://127.0.0.1:9", "--mysql-dsn", "root@tcp(127.0.0.1:9)/test")
	// Each backend once: its name, then the store's words without its
	// name again.
	want := "racetest: no server answered, nothing was measured:\n  mysql: 127.0.0.1:9 does not answer"
	if code != exitSetup || !strings.Contains(stderr, want) || !strings.Contains(stderr, "\n  redis: 127.0.0.1:9 does not answer") {
		t.Errorf("exit %d, stderr %q; want exit %d and %q, then redis's line", code, stderr, exitSetup, want)
	}
}

// bench exits 1 when the default release loses to the naive launcher beyond
// the noise, and 0 otherwise.
func TestBenchVerdict(t *testing.T) {
	rep := func(naive, def int) *bench.Report {
		return &bench.Report{Config: bench.Config{Backends: []string{"redis"}, Attempts: []int{2}}, Rows: []bench.Row{
			{Backend: "redis", N: 2, Mode: bench.Naive, Bursts: 200, Exposed: naive},
			{Backend: "redis", N: 2, Mode: bench.DefaultMode, Bursts: 200, Exposed: def},
		}}
	}
	if code := exitCode(benchVerdict(rep(196, 150))); code != exitViolated {
		t.Errorf("the default far below naive: exit %d, want %d", code, exitViolated)
	}
	if code := exitCode(benchVerdict(rep(150, 196))); code != exitOK {
		t.Errorf("the default above naive: exit %d, want %d", code, exitOK)
	}
	// A user-style launcher beating the default fails the bench as naive does.
	r := rep(150, 150)
	r.Rows = append(r.Rows, bench.Row{Backend: "redis", N: 2, Mode: bench.UserRedis, Bursts: 200, Exposed: 198})
	if code := exitCode(benchVerdict(r)); code != exitViolated {
		t.Errorf("the default far below user-redis: exit %d, want %d", code, exitViolated)
	}
}

// Over HTTP, auto below the mode it picked fails the bench (exit 1) with a
// message that names the cell, even where no other comparison lost; level
// with it, the bench passes.
func TestBenchVerdictAutoBelowItsPick(t *testing.T) {
	rep := func(auto, pick int) *bench.Report {
		return &bench.Report{Config: bench.Config{Backends: []string{bench.HTTPSpin}}, Rows: []bench.Row{
			{Backend: bench.HTTPSpin, N: 64, Mode: bench.Auto, Chose: bench.SinglePacket, Bursts: 200, Exposed: auto},
			{Backend: bench.HTTPSpin, N: 64, Mode: bench.SinglePacket, Bursts: 200, Exposed: pick},
			{Backend: bench.HTTPSpin, N: 64, Mode: bench.UserHTTP, Bursts: 200, Exposed: 100},
		}}
	}
	err := benchVerdict(rep(150, 196))
	if exitCode(err) != exitViolated || !strings.Contains(fmt.Sprint(err), "auto exposed fewer races than the mode it picks") ||
		!strings.Contains(fmt.Sprint(err), "http-spin N=64") {
		t.Errorf("auto 75%% against its pick's 98%%: %v (exit %d), want exit %d naming the cell", err, exitCode(err), exitViolated)
	}
	if err := benchVerdict(rep(190, 190)); err != nil {
		t.Errorf("auto level with its pick: %v, want a pass", err)
	}
}

// --modes narrows a run to the modes named, the user-style launchers among
// them.
func TestBenchModes(t *testing.T) {
	out, stderr, code := execWith(t, builtin.Registry(), "bench", "--backends", "redis", "-n", "2", "--bursts", "4", "--chunk", "2",
		"--modes", "last-byte,user-redis")
	if code == exitSetup {
		testenv.Unavailable(t, "redis", errors.New(stderr))
	}
	if code != exitOK && code != exitViolated {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	modes := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == "redis" && f[1] == "check-then-write" {
			modes[f[3]] = true
		}
	}
	if len(modes) != 2 || !modes["last-byte"] || !modes["user-redis"] ||
		!strings.Contains(out, "redis user-redis: one go-redis client") || !strings.Contains(out, "vs user-redis") {
		t.Errorf("rows %v, want last-byte and user-redis, its idiom and its check:\n%s", modes, out)
	}
}

// --quick against a real Redis: only the naive launcher and the default, no
// calibration, and the check's verdict as the exit code.
func TestBenchQuickOnRedis(t *testing.T) {
	out, stderr, code := execWith(t, builtin.Registry(), "bench", "--quick", "--backends", "redis", "-n", "2")
	if code == exitSetup {
		testenv.Unavailable(t, "redis", errors.New(stderr))
	}
	if code != exitOK && code != exitViolated {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if (code == exitViolated) != strings.Contains(out, "LOSES") {
		t.Errorf("exit %d, but the check says:\n%s", code, out)
	}
	modes := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == "redis" && f[1] == "check-then-write" && f[2] == "2" {
			modes[f[3]] = true
		}
	}
	if len(modes) != 2 || !modes["naive"] || !modes["last-byte"] || !strings.Contains(out, "check (exits 1") {
		t.Errorf("--quick rows %v, want naive and last-byte, then the check:\n%s", modes, out)
	}
	for _, not := range []string{"  gate  ", "resolution at N=2"} {
		if strings.Contains(out, not) {
			t.Errorf("--quick output has %q:\n%s", not, out)
		}
	}
}

// --backends http runs both HTTP targets; without -n at their own Ns (2, 20,
// 64), with -n at those; every HTTP mode has a row and a check, and the
// user's launcher is named with its idiom. http-spin needs no server.
func TestBenchHTTP(t *testing.T) {
	out, stderr, code := execWith(t, builtin.Registry(), "bench", "--backends", "http-spin", "--bursts", "2", "--chunk", "1")
	if code != exitOK && code != exitViolated {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := benchRows(out, "http-spin")
	for _, n := range []string{"2", "20", "64"} {
		for _, m := range bench.HTTPModes() {
			if !rows[n+" "+m] {
				t.Errorf("no row N=%s %s", n, m)
			}
			if m != bench.Auto && !strings.Contains(out, "http-spin N="+n+": default (auto)") {
				t.Errorf("no check at N=%s", n)
			}
		}
	}
	if len(rows) != 3*len(bench.HTTPModes()) || !strings.Contains(out, "http-spin user-http: one net/http.Client") ||
		!strings.Contains(out, "auto chose single-packet") {
		t.Errorf("rows %v, or the idiom or auto's choice missing:\n%s", rows, out)
	}
	out, stderr, code = execWith(t, builtin.Registry(), "bench", "--backends", "http-spin", "-n", "3", "--bursts", "1", "--chunk", "1", "--modes", "auto,user-http")
	if code != exitOK && code != exitViolated {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "http-spin  check-then-write  3  auto") || strings.Contains(out, "check-then-write  2  ") || strings.Contains(out, "barrier") {
		t.Errorf("-n 3 --modes auto,user-http: want N=3 rows of those two modes only:\n%s", out)
	}
}

// --quick over HTTP: auto against the user's launcher and against single-packet, its
// pick, at 2, 20 and 64.
func TestBenchQuickHTTP(t *testing.T) {
	out, stderr, code := execWith(t, builtin.Registry(), "bench", "--quick", "--backends", "http-spin")
	if code != exitOK && code != exitViolated {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := benchRows(out, "http-spin")
	want := map[string]bool{}
	for _, n := range []string{"2", "20", "64"} {
		want[n+" auto"], want[n+" user-http"], want[n+" single-packet"] = true, true, true
	}
	if !maps.Equal(rows, want) || !strings.Contains(out, "vs user-http") || !strings.Contains(out, "http-spin N=64: auto (chose single-packet)") {
		t.Errorf("--quick over HTTP: rows %v, want %v, and the checks:\n%s", rows, want, out)
	}
}

// --backends http is every HTTP target, once each, beside the servers named.
func TestBenchBackendsExpand(t *testing.T) {
	got, err := benchBackends([]string{"redis", " http", "http-spin", "postgres"})
	if want := []string{"redis", "http-spin", "http-redis", "http-postgres", "http-mysql", "postgres"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v (%v), want %v", got, err, want)
	}
	if _, err := benchBackends([]string{"http-memcached"}); exitCode(err) != exitUsage {
		t.Errorf("an unknown backend: %v, want a usage error", err)
	}
}

// benchRows are the "N mode" pairs of backend's check-then-write rows in
// bench's table.
func benchRows(out, backend string) map[string]bool {
	rows := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == backend && f[1] == "check-then-write" {
			rows[f[2]+" "+f[3]] = true
		}
	}
	return rows
}

// A comparison that measured nothing (a mode's attempts all failed, 0%
// exposed) is a setup failure (exit 3), not a pass; a loss is exit 1.
func TestBenchVerdictRefusesWhatMeasuredNothing(t *testing.T) {
	rep := func(errs, defExposed int) *bench.Report {
		return &bench.Report{Config: bench.Config{Backends: []string{"redis"}, Attempts: []int{2}}, Rows: []bench.Row{
			{Backend: "redis", N: 2, Mode: bench.Naive, Bursts: 200, Exposed: 200, Errors: 0},
			{Backend: "redis", N: 2, Mode: bench.LastByte, Bursts: 200, Exposed: defExposed, Errors: errs},
		}}
	}
	for _, c := range []struct {
		errs, exposed, code int
	}{{400, 0, exitSetup}, {0, 200, exitOK}, {0, 0, exitViolated}} {
		err := benchVerdict(rep(c.errs, c.exposed))
		if got := exitCode(err); got != c.code {
			t.Errorf("default %d/200 exposed with %d errors: exit %d (%v), want %d", c.exposed, c.errs, got, err, c.code)
		}
	}
}
