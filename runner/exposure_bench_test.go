package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// BenchmarkCPUBoundExposure is what an engine change must not lower: how
// often a burst exposes a check-then-set whose window is CPU time only (a
// busy-wait between the check and the set, nothing that blocks), as a
// team's in-memory code under race.Test or the embedded store at
// --latency 0 has. With nothing to block on, the attempts overlap only
// across the machine's Ps, and where each P's first attempt starts decides
// it: a change to how workers are woken or scheduled moves these figures
// even when the release spread looks better. Run it interleaved with the
// engine it replaces, several times (one run's figure can vary several-fold):
//
//	go test -run '^$' -bench CPUBoundExposure -benchtime 1x ./runner
//
// Stop 41 measured a fleet whose workers went on to the next attempt: half
// the spread at N=10,000, and 13-56% fewer races at N=64 with a 5 µs window
// in seven sets (docs/measurements.md, "Stop 41"). It was not kept.
func BenchmarkCPUBoundExposure(b *testing.B) {
	const bursts = 1000
	for _, n := range []int{2, 8, 64, 256} {
		for _, window := range []time.Duration{time.Microsecond, 5 * time.Microsecond, 20 * time.Microsecond} {
			b.Run(benchName(n)+"/window="+window.String(), func(b *testing.B) {
				t := &busyCheck{window: window}
				res, err := runner.Run(context.Background(), t, runner.Attempts(n), runner.Bursts(bursts), runner.Timeout(0))
				if err != nil {
					b.Fatal(err)
				}
				exposed := 0
				for _, burst := range res.Bursts {
					if burst.Effects >= 2 {
						exposed++
					}
				}
				b.ReportMetric(100*float64(exposed)/float64(len(res.Bursts)), "exposed-%")
				b.ReportMetric(loadAverage(), "load")
			})
		}
	}
}

// busyCheck is a check-then-set on one counter, its window a busy-wait:
// each attempt reads the counter, spins for window, and adds one if it
// read zero. Effects is how many did.
type busyCheck struct {
	window time.Duration
	set    atomic.Int64
}

func (*busyCheck) Prepare(context.Context) error { return nil }
func (*busyCheck) Cleanup(context.Context) error { return nil }
func (c *busyCheck) Reset(_ context.Context, b int) (runner.Subject, error) {
	c.set.Store(0)
	return runner.Subject{Burst: b}, nil
}
func (c *busyCheck) Effects(context.Context, runner.Subject) (int, error) {
	return int(c.set.Load()), nil
}
func (c *busyCheck) Open(context.Context, int, int) (runner.App, error)   { return c, nil }
func (c *busyCheck) Session(context.Context, int) (runner.Session, error) { return c, nil }
func (*busyCheck) Close() error                                           { return nil }

func (c *busyCheck) Attempt(_ context.Context, _ runner.Subject, w *runner.Worker) runner.Outcome {
	w.Mark("check")
	seen := c.set.Load()
	for end := time.Now().Add(c.window); time.Now().Before(end); {
	}
	if seen != 0 {
		return runner.Refused(nil)
	}
	c.set.Add(1)
	return runner.Done()
}
