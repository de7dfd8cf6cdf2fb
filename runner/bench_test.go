package runner_test

import (
	"context"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
)

// noop is the cheapest target there is: it measures the engine alone.
type noop struct{}

func (noop) Prepare(context.Context) error { return nil }
func (noop) Cleanup(context.Context) error { return nil }
func (noop) Reset(_ context.Context, b int) (runner.Subject, error) {
	return runner.Subject{Burst: b}, nil
}
func (noop) Effects(context.Context, runner.Subject) (int, error) { return 1, nil }
func (noop) Open(context.Context, int, int) (runner.App, error)   { return noop{}, nil }
func (noop) Session(context.Context, int) (runner.Session, error) { return noop{}, nil }
func (noop) Close() error                                         { return nil }
func (noop) Attempt(context.Context, runner.Subject, *runner.Worker) runner.Outcome {
	return runner.Done()
}

// BenchmarkReleaseSpread reports the median time from the first to the
// last worker released through the gate (target: ≤20µs at N=16, ≤100µs at
// N=64, in-process).
func BenchmarkReleaseSpread(b *testing.B) {
	for _, n := range []int{16, 64} {
		b.Run(benchName(n), func(b *testing.B) {
			res, err := runner.Run(context.Background(), noop{}, runner.Attempts(n), runner.Bursts(max(b.N, 200)))
			if err != nil {
				b.Fatal(err)
			}
			s := res.SpreadSummary()
			b.ReportMetric(float64(s.Median.Nanoseconds())/1e3, "spread-median-µs")
			b.ReportMetric(float64(s.Max.Nanoseconds())/1e3, "spread-max-µs")
		})
	}
}

// BenchmarkThroughput is bursts per second on the embedded backend with no
// simulated latency (target: ≥20,000 bursts/s at N=16): the harness must
// never be what limits a run.
func BenchmarkThroughput(b *testing.B) {
	for _, name := range []string{scenarios.CheckThenWrite, scenarios.ConditionalUpdate} {
		b.Run(name, func(b *testing.B) {
			t := memTarget(b, name, 16)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			res, err := runner.Run(context.Background(), t, runner.Attempts(16), runner.Bursts(b.N))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(res.Bursts))/time.Since(start).Seconds(), "bursts/s")
		})
	}
}

// BenchmarkHugeBurst fires 10,000 attempts in one burst and reports the
// memory it took.
func BenchmarkHugeBurst(b *testing.B) {
	const n = 10_000
	for range b.N {
		t := memTarget(b, scenarios.UniqueInsert, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := runner.Run(context.Background(), t, runner.Attempts(n), runner.Bursts(1))
		runtime.ReadMemStats(&after)
		if err != nil {
			b.Fatal(err)
		}
		if got := res.Bursts[0].Outcomes[runner.Executed] + res.Bursts[0].Outcomes[runner.Declined]; got != n {
			b.Fatalf("%d attempts finished, want %d", got, n)
		}
		if res.Bursts[0].Effects != 1 {
			b.Fatalf("effects = %d, want 1", res.Bursts[0].Effects)
		}
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), "MiB-allocated")
		b.ReportMetric(float64(after.Sys)/(1<<20), "MiB-sys")
		b.ReportMetric(float64(res.Bursts[0].Overlap), "overlap")
	}
}

func memTarget(b *testing.B, scenario string, n int) runner.Target {
	r := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		r.AddScenario(s)
	}
	memstore.Register(r)
	t, err := r.Build(context.Background(), scenario, memstore.Name, scenarios.Params{RunID: "bench", Attempts: n, Replicas: 1})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

func benchName(n int) string { return "N=" + strconv.Itoa(n) }

// BenchmarkLargeBurst fires bursts of N attempts at the embedded backend
// with no simulated latency (--latency 0) through the gate, and reports the
// median release spread (first to last worker past the gate), the memory
// one attempt costs — allocated, and the growth of the heap and of the
// goroutine stacks while the run lasted, over N — and the bursts per second.
// Goals (issue 15): spread ≤20µs at N=16, ≤200µs at N=1,000, ≤2ms at
// N=10,000; ≤6 KiB per attempt; ≥20,000 bursts/s at N=16.
func BenchmarkLargeBurst(b *testing.B) {
	for _, n := range []int{16, 1_000, 10_000} {
		b.Run(benchName(n), func(b *testing.B) {
			t := memTarget(b, scenarios.CheckThenWrite, n)
			bursts := max(b.N, 20_000/n, 10)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpu0 := cpuTime()
			b.ResetTimer()
			start := time.Now()
			res, err := runner.Run(context.Background(), t, runner.Attempts(n), runner.Bursts(bursts))
			elapsed := time.Since(start)
			b.StopTimer()
			cpu := cpuTime() - cpu0
			runtime.ReadMemStats(&after)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Bursts) != bursts {
				b.Fatalf("%d bursts, want %d", len(res.Bursts), bursts)
			}
			s := res.SpreadSummary()
			b.ReportMetric(float64(s.Median.Nanoseconds())/1e3, "spread-median-µs")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(bursts*n), "B-alloc/attempt")
			if n >= 1_000 {
				// The memory the process took from the system for the
				// burst (heap and goroutine stacks), over N: at N=16 one
				// heap arena is all of it, and says nothing per attempt.
				grown := int64(after.HeapSys+after.StackSys) - int64(before.HeapSys+before.StackSys)
				b.ReportMetric(float64(max(grown, 0))/float64(n), "B-sys/attempt")
			}
			b.ReportMetric(float64(bursts)/elapsed.Seconds(), "bursts/s")
			// The CPU the whole run took per attempt (both cores, user and
			// system): unlike the spread, it hardly moves with the load.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(bursts*n), "cpu-ns/attempt")
		})
	}
}

// cpuTime is the CPU time the process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
