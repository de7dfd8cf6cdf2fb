package bench

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

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
		},
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep.Print(os.Stdout)
}
