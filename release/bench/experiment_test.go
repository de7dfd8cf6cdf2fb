package bench

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/scenarios/builtin"
)

// TestArrivalExperiment measures, on the servers, how the wire release's
// choices move the attempts' arrival spread (the servers' own stamps) and
// the races exposed: one writer thread or one per CPU, leaving the CPUs to
// the server for a while after the last write (settle), and a round trip of
// the attempt's own just before its held request (warm, calibration target
// only). The variants take turns in chunks, as in 'racetest bench'. It is a
// measurement, not a test: it runs only with RACETEST_BENCH_EXPERIMENT=1
// (RACETEST_BENCH_BURSTS, RACETEST_BENCH_N and RACETEST_BENCH_BACKENDS tune
// it); docs/measurements.md has what it found.
func TestArrivalExperiment(t *testing.T) {
	if os.Getenv("RACETEST_BENCH_EXPERIMENT") == "" {
		t.Skip("a measurement: set RACETEST_BENCH_EXPERIMENT=1 to run it")
	}
	bursts, _ := strconv.Atoi(os.Getenv("RACETEST_BENCH_BURSTS"))
	attempts := []int{2}
	if s := os.Getenv("RACETEST_BENCH_N"); s != "" {
		attempts = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			attempts = append(attempts, n)
		}
	}
	backends := []string{"mysql", "postgres", "redis"}
	if s := os.Getenv("RACETEST_BENCH_BACKENDS"); s != "" {
		backends = strings.Split(s, ",")
	}
	settle := 50 * time.Microsecond
	cfg := Config{
		Backends: backends, Attempts: attempts, Bursts: bursts, Chunk: 20, Registry: builtin.Registry(),
		Progress: func(s string) { t.Log(s) },
		variants: []variant{
			{name: Naive},
			{name: Gate},
			{name: LastByte, wire: &release.WireOptions{}},
			{name: "lb-cpus", wire: &release.WireOptions{Writers: runtime.GOMAXPROCS(0)}},
			{name: "lb-1", wire: &release.WireOptions{Writers: 1}},
			{name: "lb-1-settle", wire: &release.WireOptions{Writers: 1, Settle: settle}},
			{name: "lb-cpus-settle", wire: &release.WireOptions{Writers: runtime.GOMAXPROCS(0), Settle: settle}},
			{name: "lb-1-warm", wire: &release.WireOptions{Writers: 1}, warm: true},
			{name: "lb-no-occupy", wire: &release.WireOptions{Occupy: -1}},
			{name: "lb-occupy16", wire: &release.WireOptions{Occupy: 16}},
			{name: "lb-occupy64", wire: &release.WireOptions{Occupy: 64}},
			{name: "lb-occupy1024", wire: &release.WireOptions{Occupy: 1024}},
			{name: "lb-occupy256-cpus", wire: &release.WireOptions{Occupy: 256, Writers: runtime.GOMAXPROCS(0)}},
		},
	}
	if s := os.Getenv("RACETEST_BENCH_MODES"); s != "" {
		keep := cfg.variants[:0]
		for _, v := range cfg.variants {
			if slices.Contains(strings.Split(s, ","), v.name) {
				keep = append(keep, v)
			}
		}
		cfg.variants = keep
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep.Print(os.Stdout)
}

// TestMain lets the test binary serve an HTTP target in a process of its
// own, as racetest does (TestHTTPProcessExperiment, TestTargetProcess).
func TestMain(m *testing.M) {
	if code, ok := ServeTargetFromEnv(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestHTTPProcessExperiment runs the HTTP bench with its targets served from
// a process of their own rather than the bench's: whether a mode's lead or
// loss is the shared Go runtime's. A measurement, not a test: it runs only
// with RACETEST_BENCH_EXPERIMENT=http (RACETEST_BENCH_BURSTS,
// RACETEST_BENCH_N, RACETEST_BENCH_BACKENDS and RACETEST_BENCH_MODES tune it).
func TestHTTPProcessExperiment(t *testing.T) {
	if os.Getenv("RACETEST_BENCH_EXPERIMENT") != "http" {
		t.Skip("a measurement: set RACETEST_BENCH_EXPERIMENT=http to run it")
	}
	bursts, _ := strconv.Atoi(os.Getenv("RACETEST_BENCH_BURSTS"))
	var attempts []int
	if s := os.Getenv("RACETEST_BENCH_N"); s != "" {
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			attempts = append(attempts, n)
		}
	}
	backends := HTTPBackends
	if s := os.Getenv("RACETEST_BENCH_BACKENDS"); s != "" {
		backends = strings.Split(s, ",")
	}
	var modes []string
	if s := os.Getenv("RACETEST_BENCH_MODES"); s != "" {
		modes = strings.Split(s, ",")
	}
	cfg := Config{Backends: backends, HTTPAttempts: attempts, Bursts: bursts, Chunk: 20, HTTPModes: modes,
		Conn:     testenv.Conns("redis"),
		Progress: func(s string) { t.Log(s) }}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.TargetExecutable = exe
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep.Print(os.Stdout)
}
