package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain first checks that the workers finish a wave: with workers that
// never start an attempt, every test of the package would wait for it
// until go test's timeout. It fails in seconds instead, saying why.
func TestMain(m *testing.M) {
	if err := wavesFinish(3*gateWorkers+5, 10*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// wavesFinish releases three waves of n attempts that return at once, and
// says which did not finish within limit.
func wavesFinish(n int, limit time.Duration) error {
	ws := startWorkers(n)
	for wave := 1; wave <= 3; wave++ {
		var done sync.WaitGroup
		done.Add(n)
		ws.release(func(int) { done.Done() })
		if !within(&done, limit) {
			ws.stop(false)
			return fmt.Errorf("wave %d of %d attempts did not finish in %s", wave, n, limit)
		}
	}
	ws.stop(true)
	return nil
}

// within reports whether wg's count reached zero within limit.
func within(wg *sync.WaitGroup, limit time.Duration) bool {
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
		return true
	case <-time.After(limit):
		return false
	}
}

// sweepInFlight is inFlight as it was before issue 28, with a comparison
// sort: the oracle the radix sort is checked against.
func sweepInFlight(ws []*Worker) int {
	type edge struct {
		at    time.Duration
		delta int
	}
	var es []edge
	for _, w := range ws {
		es = append(es, edge{w.marks[0].At, +1}, edge{w.marks[len(w.marks)-1].At, -1})
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].at != es[j].at {
			return es[i].at < es[j].at
		}
		return es[i].delta < es[j].delta
	})
	cur, most := 0, 0
	for _, e := range es {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}

// The radix sort gives what the comparison sort gave, on both sides of
// radixMin, on narrow and wide time ranges (one pass to eight), with ties
// between ends and starts, with marks before the release (negative), and
// with one buffer reused across waves of different sizes.
func TestInFlightMatchesTheSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 28))
	buf := &edges{}
	for trial := range 400 {
		n := 1 + rng.IntN(2*radixMin)
		if trial%7 == 0 {
			n = radixMin/2 + rng.IntN(radixMin) // around the switch
		}
		span := int64(1) << (3 + rng.IntN(58)) // from 8 ns to years
		offset := time.Duration(rng.Int64N(1000)) - 500
		ws := make([]*Worker, n)
		for i := range ws {
			from := offset + time.Duration(rng.Int64N(span))
			to := from + time.Duration(rng.Int64N(span))
			if trial%3 == 0 {
				// Coarse instants: many starts and ends coincide.
				from, to = from/time.Duration(span/4+1), to/time.Duration(span/4+1)
			}
			ws[i] = &Worker{marks: []Mark{{"released", from}, {"act", from}, {"done", to}}}
		}
		want := sweepInFlight(ws)
		if got := inFlight(ws, buf); got != want {
			t.Fatalf("trial %d (n=%d, span=%d): inFlight = %d, the sweep says %d", trial, n, span, got, want)
		}
	}
}

func TestInFlightLarge(t *testing.T) {
	// Nested intervals: all n in flight at the middle.
	n := 3 * radixMin
	ws := make([]*Worker, n)
	for i := range ws {
		ws[i] = &Worker{marks: []Mark{{"released", time.Duration(i)}, {"done", time.Duration(2*n - i)}}}
	}
	if got := inFlight(ws, &edges{}); got != n {
		t.Errorf("nested: inFlight = %d, want %d", got, n)
	}
	// A chain where each ends as the next starts: touching, never two.
	for i := range ws {
		ws[i] = &Worker{marks: []Mark{{"released", time.Duration(i * 1000)}, {"done", time.Duration((i + 1) * 1000)}}}
	}
	if got := inFlight(ws, &edges{}); got != 1 {
		t.Errorf("chain: inFlight = %d, want 1", got)
	}
	if got := inFlight(nil, &edges{}); got != 0 {
		t.Errorf("no workers: inFlight = %d, want 0", got)
	}
}

// workerGoroutines counts the goroutines running a fleet worker.
// workersLeft is workerGoroutines once they had time to exit: a worker
// counted down (stop's wait is over) is still on its way out for a moment,
// and was counted as left (1 in 10 runs under -race). A worker that never
// exits is still counted.
func workersLeft() int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := workerGoroutines()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

func workerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "runner.(*workers).work(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Workers live as long as a run and no longer: each run starts N (not N
// per wave), and none is left once Run returns, whether the run ended
// normally, stopped on a violation, failed, or was cancelled.
func TestWorkersDoNotOutliveTheRun(t *testing.T) {
	if n := workersLeft(); n != 0 {
		t.Fatalf("%d workers before the run", n)
	}
	const n = 40
	var most sync.Mutex
	seen := 0
	c := newCounter()
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		most.Lock()
		if s.Burst == 1 && w.ID == 0 {
			seen = workerGoroutines()
		}
		most.Unlock()
		return Done()
	}
	if _, err := Run(context.Background(), c, Attempts(n), Bursts(3), Waves(2), Replicas(2)); err != nil {
		t.Fatal(err)
	}
	if seen != n {
		t.Errorf("%d workers during the run, want %d", seen, n)
	}
	if left := workersLeft(); left != 0 {
		t.Errorf("%d workers left after the run", left)
	}

	// Released at the wire, over waves and a deploy.
	c = newCounter()
	res, err := Run(context.Background(), c, Attempts(n), Bursts(2), Waves(2), Deploy(true), Release(newScriptedWire(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Release == GateRelease {
		t.Fatal("the wire release fell back to the gate")
	}
	if left := workersLeft(); left != 0 {
		t.Errorf("%d workers left after a wire release", left)
	}

	// Cancelled mid-run (Ctrl-C).
	ctx, cancel := context.WithCancel(context.Background())
	c = newCounter()
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		if s.Burst == 2 {
			cancel()
		}
		return Done()
	}
	if _, err := Run(ctx, c, Attempts(n), Bursts(10)); err == nil {
		t.Error("a cancelled run returned no error")
	}
	if left := workersLeft(); left != 0 {
		t.Errorf("%d workers left after a cancelled run", left)
	}

	// A reset that fails ends the run with an error.
	bad := &failingReset{counter: newCounter(), at: 2}
	if _, err := Run(context.Background(), bad, Attempts(n), Bursts(5)); err == nil {
		t.Error("a failing reset returned no error")
	}
	if left := workersLeft(); left != 0 {
		t.Errorf("%d workers left after a failed run", left)
	}
}

type failingReset struct {
	*counter
	at int
}

func (f *failingReset) Reset(ctx context.Context, b int) (Subject, error) {
	if b == f.at {
		return Subject{}, fmt.Errorf("reset %d refused", b)
	}
	return f.counter.Reset(ctx, b)
}

// A run whose attempts hang returns ErrHung without waiting for them; the
// hung workers end when their attempts finally return.
func TestHungWorkersEndWhenTheirAttemptsReturn(t *testing.T) {
	old := hangGrace
	hangGrace = 20 * time.Millisecond
	defer func() { hangGrace = old }()
	unblock := make(chan struct{})
	c := newCounter()
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		if w.ID == 1 {
			<-unblock // ignores its context
		}
		return Done()
	}
	_, err := Run(context.Background(), c, Attempts(4), Bursts(2), Timeout(10*time.Millisecond))
	if err == nil {
		t.Fatal("a hung run returned no error")
	}
	// The others end as soon as they run (the run does not wait for them),
	// and the hung one stays until its attempt returns. Not a timing
	// assertion: it waits, however long the machine takes.
	for workerGoroutines() > 1 {
		time.Sleep(time.Millisecond)
	}
	if left := workerGoroutines(); left != 1 {
		t.Errorf("%d workers left after the hung run, want the 1 still in its attempt", left)
	}
	close(unblock)
	for workerGoroutines() != 0 {
		time.Sleep(time.Millisecond)
	}
}

// What persistent workers keep of the go statement's ordering: no attempt
// starts before its burst's Reset, nor before every attempt of the wave
// before it returned; Effects counts only after every attempt of the
// burst returned; and the gate and the wire release alike.
func TestWavesDoNotOverlapAcrossTheGate(t *testing.T) {
	const n, bursts, waves = 8, 4, 3
	var mu sync.Mutex
	var log []string
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	c := &orderLog{counter: newCounter(), note: note}
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		note(fmt.Sprintf("start %d %d", s.Burst, w.Wave))
		runtime.Gosched()
		note(fmt.Sprintf("end %d %d", s.Burst, w.Wave))
		return Done()
	}
	if _, err := Run(context.Background(), c, Attempts(n), Bursts(bursts), Waves(waves)); err != nil {
		t.Fatal(err)
	}
	// The log, read in order, is a sequence of phases: reset b, then for
	// each wave n starts and n ends (interleaved, but no start of the next
	// wave before the last end of this one), then effects b.
	var burst, wave, started, ended int
	phase := "reset"
	for _, line := range log {
		var kind string
		var b, wv int
		fmt.Sscan(line, &kind, &b, &wv)
		switch kind {
		case "reset":
			if phase != "reset" || b != burst {
				t.Fatalf("%q during %s of burst %d", line, phase, burst)
			}
			phase, wave, started, ended = "attempts", 0, 0, 0
		case "start", "end":
			if phase != "attempts" || b != burst || wv != wave {
				t.Fatalf("%q during %s of burst %d wave %d", line, phase, burst, wave)
			}
			if kind == "start" {
				started++
			} else {
				ended++
			}
			if started > n || ended > started {
				t.Fatalf("%q: %d started, %d ended in wave %d", line, started, ended, wave)
			}
			if ended == n {
				wave, started, ended = wave+1, 0, 0
			}
		case "effects":
			if phase != "attempts" || b != burst || wave != waves {
				t.Fatalf("%q in burst %d after %d of %d waves", line, burst, wave, waves)
			}
			phase, burst = "reset", burst+1
		}
	}
	if burst != bursts {
		t.Fatalf("%d bursts logged, want %d", burst, bursts)
	}
}

type orderLog struct {
	*counter
	note func(string)
}

func (o *orderLog) Reset(ctx context.Context, b int) (Subject, error) {
	o.note(fmt.Sprintf("reset %d 0", b))
	return o.counter.Reset(ctx, b)
}

func (o *orderLog) Effects(ctx context.Context, s Subject) (int, error) {
	o.note(fmt.Sprintf("effects %d 0", s.Burst))
	return o.counter.Effects(ctx, s)
}

// Every worker waits at its block's gate, and a wave runs each worker once,
// whatever the number of blocks: below a block, one block exactly, one
// worker over, and several with the last one partial.
func TestEveryBlockIsReleased(t *testing.T) {
	for _, n := range []int{1, gateWorkers - 1, gateWorkers, gateWorkers + 1, 3*gateWorkers + 5} {
		ws := startWorkers(n)
		if want := (n + gateWorkers - 1) / gateWorkers; ws.gates != want || len(ws.next.rest) != want-1 {
			t.Errorf("N=%d: %d gates (%d besides the first), want %d", n, ws.gates, len(ws.next.rest), want)
		}
		ran := make([]int, n)
		for wave := 1; wave <= 3; wave++ {
			var done sync.WaitGroup
			done.Add(n)
			ws.release(func(i int) {
				ran[i]++
				done.Done()
			})
			done.Wait()
			for i, r := range ran {
				if r != wave {
					t.Fatalf("N=%d, wave %d: worker %d ran %d times", n, wave, i, r)
				}
			}
		}
		ws.stop(true)
	}
	if left := workersLeft(); left != 0 {
		t.Errorf("%d workers left after stop", left)
	}
}

// An attempt that blocks keeps its worker, and the others are started all
// the same: here no attempt returns before every one has started. A fleet
// that gave one goroutine a second attempt before its first returned would
// fail here (stop 41's workers, which went on to the next attempt only once
// theirs had returned, passed).
func TestBlockedAttemptsEachHaveAWorker(t *testing.T) {
	const n = 2*gateWorkers + 3
	ws := startWorkers(n)
	for wave := 1; wave <= 3; wave++ {
		var in, done sync.WaitGroup
		in.Add(n)
		done.Add(n)
		ws.release(func(int) {
			in.Done()
			in.Wait()
			done.Done()
		})
		if !within(&done, 30*time.Second) {
			ws.stop(false) // its attempts wait for ever: do not wait for them
			t.Fatalf("wave %d: the attempts never were all in flight at once", wave)
		}
	}
	ws.stop(true)
}
