package runner_test

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// BenchmarkEngine measures the gate engine against two references in the
// same run (issue 28, issue 46 item 4). The bare one: N goroutines parked
// on one channel, which is closed, each doing nothing but note when it
// woke. The stateful one (stateful) releases the same way, and each
// goroutine then does what any engine does to count an attempt: it notes
// its release, counts it, calls the attempt through runner.App, notes its
// end, stores its outcome and counts it done. The references are what the
// machine costs; the engine's figures are ratios to them, so that they hold
// on any machine and under any load that hits all alike. References and
// engine alternate in chunks (which goes first turns too), each chunk's
// line is logged with the load average. spread-ratio is the median spread
// of every engine burst of the run over the bare reference's;
// spread-ratio-stateful over the stateful reference's; spread-ratio-rounds
// the median of the rounds' ratios (bare); bursts/s-ratio the median of the
// rounds' ratios (bare). Run it with
//
//	go test -run '^$' -bench Engine -benchtime 1x -v ./runner
//
// (it ignores b.N: its rounds are its repetitions). Goals: the median
// release spread at most 1.5× the stateful reference's at every N, and the
// bare one's at N=16 and N=1,000; bursts per second at least 0.8× at N=16.
// Why the stateful reference at N=10,000: on two Ps an attempt that never
// blocks runs to its end before the next worker starts, so the spread is
// about N/2 whole turns, and a reference whose turn is one clock read
// measures a turn no engine that counts its attempts can have
// (docs/measurements.md, "Stop 40" and "Stop 53").
// spread-ratio-untimed is the engine's with no attempt timeout
// (--timeout 0), also beside the bare reference. spread-ratio-yield is the
// engine's with an attempt that yields its P once (runtime.Gosched), as one
// that waits for a round trip does: a figure for comparing engines whose
// gain is only for attempts that never block (stop 41's was), with no goal.
// alloc-B/attempt and allocs/attempt are the engine's alone (no reference
// runs in between), over every burst it fired.
func BenchmarkEngine(b *testing.B) {
	const rounds = 6
	for _, n := range []int{16, 1_000, 10_000} {
		b.Run(benchName(n), func(b *testing.B) {
			bursts := max(32_000/n, 10)
			var spread, stateRatio, untimed, yielded, rate, loads []float64
			var refAll, stateAll, engAll, freeAll, yieldAll []time.Duration
			var allocs, bytes uint64
			for round := range rounds {
				// The five in turn, starting one further each round.
				var ref, state, eng, free, yield chunk
				for k := range 5 {
					switch (round + k) % 5 {
					case 0:
						ref = bare(n, bursts)
					case 4:
						state = stateful(noop{}, n, bursts)
					case 1:
						eng = engineChunk(b, noop{}, n, bursts, runner.DefaultTimeout)
					case 2:
						free = engineChunk(b, noop{}, n, bursts, 0)
					case 3:
						yield = engineChunk(b, yielder{}, n, bursts, runner.DefaultTimeout)
					}
				}
				refAll = append(refAll, ref.spreads...)
				stateAll = append(stateAll, state.spreads...)
				engAll = append(engAll, eng.spreads...)
				freeAll = append(freeAll, free.spreads...)
				yieldAll = append(yieldAll, yield.spreads...)
				allocs += eng.mallocs
				bytes += eng.bytes
				load := loadAverage()
				loads = append(loads, load)
				spread = append(spread, float64(eng.spread)/float64(max(ref.spread, 1)))
				stateRatio = append(stateRatio, float64(eng.spread)/float64(max(state.spread, 1)))
				untimed = append(untimed, float64(free.spread)/float64(max(ref.spread, 1)))
				yielded = append(yielded, float64(yield.spread)/float64(max(ref.spread, 1)))
				rate = append(rate, eng.rate/ref.rate)
				b.Logf("round %d, load %.1f: spread %v (reference %v, stateful %v), ×%.2f (stateful ×%.2f; ×%.2f with no attempt timeout, ×%.2f with attempts that yield); bursts/s %.0f (reference %.0f), ×%.2f",
					round, load, eng.spread, ref.spread, state.spread, spread[round], stateRatio[round], untimed[round], yielded[round], eng.rate, ref.rate, rate[round])
			}
			// Over every burst of the run, not the median of the rounds'
			// ratios: at N=10,000 a chunk is 10 bursts of 10-80 ms each,
			// and a loaded machine's preemptions swing one chunk's median
			// by ×10 (the rounds' lines show it).
			ref := float64(medianDuration(refAll))
			b.ReportMetric(float64(medianDuration(engAll))/ref, "spread-ratio")
			b.ReportMetric(float64(medianDuration(engAll))/float64(medianDuration(stateAll)), "spread-ratio-stateful")
			b.ReportMetric(float64(medianDuration(freeAll))/ref, "spread-ratio-untimed")
			b.ReportMetric(float64(medianDuration(yieldAll))/ref, "spread-ratio-yield")
			b.ReportMetric(median(spread), "spread-ratio-rounds")
			b.ReportMetric(median(rate), "bursts/s-ratio")
			b.ReportMetric(float64(bytes)/float64(rounds*bursts*n), "alloc-B/attempt")
			b.ReportMetric(float64(allocs)/float64(rounds*bursts*n), "allocs/attempt")
			b.ReportMetric(median(loads), "load")
		})
	}
}

// chunk is what one run of bursts gave: its median release spread, its
// bursts per second, and (for the engine) what it allocated.
type chunk struct {
	spread         time.Duration
	spreads        []time.Duration // each burst's
	rate           float64
	mallocs, bytes uint64
}

// bare is the reference: for each burst, n goroutines park on one channel;
// once all have parked it is closed, and each notes when it woke. A burst's
// spread is the first to the last waking.
func bare(n, bursts int) chunk { return broadcast(n, bursts, nil) }

// stateful is the reference with an engine's work per attempt: released
// as bare's goroutines are, each notes when it woke and counts it, calls
// the attempt of its own session of t (noop's does nothing) through the
// interface, as the engine's worker does, notes when it returned, stores
// its outcome and counts it done. A burst's spread is bare's.
func stateful(t runner.Target, n, bursts int) chunk {
	ctx := context.Background()
	app, err := t.Open(ctx, 0, 1)
	if err != nil {
		panic(err)
	}
	sessions := make([]runner.Session, n)
	for i := range sessions {
		if sessions[i], err = app.Session(ctx, i); err != nil {
			panic(err)
		}
	}
	ended := make([]time.Duration, n)
	outs := make([]runner.Outcome, n)
	var released, finished atomic.Int64
	c := broadcast(n, bursts, func(k int) func(i int, base time.Time) {
		subj, err := t.Reset(ctx, k)
		if err != nil {
			panic(err)
		}
		return func(i int, base time.Time) {
			released.Add(1)
			o := sessions[i].Attempt(ctx, subj, nil)
			ended[i] = time.Since(base)
			outs[i] = o
			finished.Add(1)
		}
	})
	if finished.Load() != int64(n*bursts) || released.Load() != finished.Load() {
		panic("stateful: an attempt was not counted")
	}
	return c
}

// broadcast releases n goroutines together for each of bursts bursts: each
// parks on one channel; once all have parked it is closed, and each notes
// when it woke, then takes its turn (burst(k), made before the burst's
// goroutines start; none when burst is nil). A burst's spread is the first
// to the last waking.
func broadcast(n, bursts int, burst func(k int) func(i int, base time.Time)) chunk {
	woke := make([]time.Duration, n)
	spreads := make([]time.Duration, bursts)
	start := time.Now()
	for k := range bursts {
		var turn func(int, time.Time)
		if burst != nil {
			turn = burst(k)
		}
		var ready, done sync.WaitGroup
		ready.Add(n)
		done.Add(n)
		gate := make(chan struct{})
		var base time.Time
		for i := range n {
			go func() {
				defer done.Done()
				ready.Done()
				<-gate
				woke[i] = time.Since(base)
				if turn != nil {
					turn(i, base)
				}
			}()
		}
		ready.Wait()
		base = time.Now()
		close(gate)
		done.Wait()
		spreads[k] = slices.Max(woke) - slices.Min(woke)
	}
	rate := float64(bursts) / time.Since(start).Seconds()
	return chunk{spread: medianDuration(spreads), spreads: spreads, rate: rate}
}

// engineChunk runs the engine for bursts bursts of n attempts at t: noop,
// which does nothing either, so that what is measured is the engine, or
// yielder. The attempt timeout is the default's, or 0 (none): its timer
// makes the runtime read the clock at every goroutine switch on the P that
// holds it (checkTimers), which the reference never pays.
func engineChunk(b *testing.B, t runner.Target, n, bursts int, timeout time.Duration) chunk {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	res, err := runner.Run(context.Background(), t, runner.Attempts(n), runner.Bursts(bursts), runner.Timeout(timeout))
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		b.Fatal(err)
	}
	if len(res.Bursts) != bursts {
		b.Fatalf("%d bursts, want %d", len(res.Bursts), bursts)
	}
	spreads := make([]time.Duration, len(res.Bursts))
	for i, b := range res.Bursts {
		spreads[i] = b.Spread
	}
	return chunk{
		spread:  res.SpreadSummary().Median,
		spreads: spreads,
		rate:    float64(bursts) / elapsed.Seconds(),
		mallocs: after.Mallocs - before.Mallocs,
		bytes:   after.TotalAlloc - before.TotalAlloc,
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadAverage is the one-minute load average (0 where /proc has none).
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	l, _ := strconv.ParseFloat(f[0], 64)
	return l
}

// yielder is noop whose attempt yields its P once, as an attempt that waits
// for its store does.
type yielder struct{ noop }

func (yielder) Open(context.Context, int, int) (runner.App, error)   { return yielder{}, nil }
func (yielder) Session(context.Context, int) (runner.Session, error) { return yielder{}, nil }
func (yielder) Attempt(context.Context, runner.Subject, *runner.Worker) runner.Outcome {
	runtime.Gosched()
	return runner.Done()
}
