package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The tests in this file pin the figures a verdict is built from: how an
// attempt is classified, how many attempts overlapped, how far apart they
// were released, and which errors the report names. Each one fails on a
// plausible one-line bug in the engine (see scripts/mutation.sh).

// errDriverTimeout is what a database driver returns when its own read
// deadline fires: an error of its own, not wrapping context.DeadlineExceeded.
var errDriverTimeout = errors.New("read tcp 127.0.0.1:3306: i/o timeout")

// waitThenDriverError is an attempt that is still waiting when the attempt
// timeout fires and then reports the driver's own error as a plain error.
func waitThenDriverError(ctx context.Context, _ Subject, w *Worker) Outcome {
	w.Mark("act")
	<-ctx.Done()
	return Outcome{Class: Error, Err: errDriverTimeout}
}

// A timed-out attempt may have run in the store: whatever error the driver
// chose to return, the engine's own deadline makes it unknown, never an
// error (which would read as "did not run") nor executed.
func TestTimedOutAttemptWithDriverErrorIsUnknown(t *testing.T) {
	for _, wire := range []bool{false, true} {
		t.Run(fmt.Sprintf("wire=%v", wire), func(t *testing.T) {
			c := newCounter()
			c.attempt = waitThenDriverError
			opts := []Option{Attempts(3), Bursts(2), Timeout(5 * time.Millisecond)}
			if wire {
				opts = append(opts, Release(newFakeWire()))
			}
			res, err := Run(context.Background(), c, opts...)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Outcomes()
			if got[Unknown] != 6 || got[Error] != 0 || got[Executed] != 0 {
				t.Errorf("outcomes %v, want all 6 unknown: the attempt timed out, so it may have run", got)
			}
			// The driver's words are kept: they say what the timeout looked like.
			if w := res.Example.Workers[0]; w.Outcome != Unknown || w.Err != errDriverTimeout.Error() {
				t.Errorf("trace: %s %q, want unknown with the driver's error", w.Outcome, w.Err)
			}
		})
	}
}

// The other side of the same rule: an attempt that fails on its own, well
// within its timeout, is an error, and one that finished is executed.
func TestAttemptWithinTimeoutKeepsItsClass(t *testing.T) {
	for _, wire := range []bool{false, true} {
		t.Run(fmt.Sprintf("wire=%v", wire), func(t *testing.T) {
			c := newCounter()
			c.attempt = func(_ context.Context, s Subject, w *Worker) Outcome {
				w.Mark("act")
				if w.ID == 0 {
					return Failed(errors.New("connection reset by peer"))
				}
				c.mu.Lock()
				c.effects[s.Key]++
				c.mu.Unlock()
				return Done()
			}
			opts := []Option{Attempts(3), Bursts(2), Timeout(time.Minute)}
			if wire {
				opts = append(opts, Release(newFakeWire()))
			}
			res, err := Run(context.Background(), c, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Outcomes(); got[Error] != 2 || got[Executed] != 4 || got[Unknown] != 0 {
				t.Errorf("outcomes %v, want 2 errors and 4 executed", got)
			}
		})
	}
}

// --timeout 0 means no attempt timeout: a slow attempt that honours its
// context runs to the end, and the run does not call it hung.
func TestTimeoutZeroMeansNone(t *testing.T) {
	old := hangGrace
	hangGrace = time.Millisecond
	defer func() { hangGrace = old }()
	for _, wire := range []bool{false, true} {
		t.Run(fmt.Sprintf("wire=%v", wire), func(t *testing.T) {
			c := newCounter()
			c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
				w.Mark("act")
				select {
				case <-ctx.Done():
					return Failed(context.Cause(ctx))
				case <-time.After(30 * time.Millisecond):
				}
				c.mu.Lock()
				c.effects[s.Key]++
				c.mu.Unlock()
				return Done()
			}
			opts := []Option{Attempts(2), Bursts(2), Timeout(0)}
			if wire {
				opts = append(opts, Release(newFakeWire()))
			}
			res, err := Run(context.Background(), c, opts...)
			if err != nil {
				t.Fatalf("err = %v: with no timeout a 30ms attempt is not hung", err)
			}
			if got := res.Outcomes(); got[Executed] != 4 {
				t.Errorf("outcomes %v, want all 4 executed: --timeout 0 sets no deadline", got)
			}
			if res.EffectsSummary().Max != 2 {
				t.Errorf("effects %+v, want 2 per burst", res.EffectsSummary())
			}
		})
	}
}

// The report names the errors attempts met, conflicts (deadlocks,
// serialization failures) included; a refusal by the guard is the pattern
// working, not an error.
func TestErrorsCountConflictsNotRefusals(t *testing.T) {
	c := newCounter()
	c.attempt = func(_ context.Context, s Subject, w *Worker) Outcome {
		switch w.ID {
		case 0:
			return Retry(errors.New("Deadlock found when trying to get lock"))
		case 1:
			return Refused(errors.New("Duplicate entry"))
		case 2:
			return Failed(errors.New("connection refused"))
		case 3:
			return Outcome{Class: Conflict} // a conflict without words adds no message
		}
		c.mu.Lock()
		c.effects[s.Key]++
		c.mu.Unlock()
		return Done()
	}
	res, err := Run(context.Background(), c, Attempts(5), Bursts(3))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"Deadlock found when trying to get lock": 3, "connection refused": 3}
	if fmt.Sprint(res.Errors) != fmt.Sprint(want) {
		t.Errorf("errors %v, want %v", res.Errors, want)
	}
	if got := res.Outcomes(); got != [NumClasses]int{Executed: 3, Declined: 3, Conflict: 6, Error: 3} {
		t.Errorf("outcomes %v", got)
	}
}

// A run with many distinct error messages keeps the first maxErrorKinds of
// them and goes on counting those.
func TestErrorKindsAreCapped(t *testing.T) {
	const n = maxErrorKinds + 5
	c := newCounter()
	c.attempt = func(_ context.Context, _ Subject, w *Worker) Outcome {
		return Failed(fmt.Errorf("error %02d", w.ID))
	}
	res, err := Run(context.Background(), c, Attempts(n), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != maxErrorKinds {
		t.Errorf("%d error kinds kept, want %d", len(res.Errors), maxErrorKinds)
	}
	for i := range maxErrorKinds {
		if got := res.Errors[fmt.Sprintf("error %02d", i)]; got != 2 {
			t.Errorf("error %02d counted %d times, want 2 (once per burst)", i, got)
		}
	}
}

// scriptedWire is a wire release whose requests leave when the test says:
// each worker's first request is on the wire at begin+offset (offsets per
// wave), or, without offsets, at the moment the attempt armed it.
type scriptedWire struct {
	*fakeWire
	offsets [][]time.Duration // [wave][worker]
	// silent workers send nothing once their first step began; late ones
	// send theirs on their own.
	silent, late map[int]bool

	mu       sync.Mutex
	wave     int
	begun    time.Time
	armedAt  map[int]time.Time
	finished map[int]chan struct{}
}

func newScriptedWire(offsets [][]time.Duration) *scriptedWire {
	return &scriptedWire{fakeWire: newFakeWire(), offsets: offsets, wave: -1}
}

func (s *scriptedWire) Begin(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wave++
	s.begun = time.Now()
	s.armedAt = map[int]time.Time{}
	s.finished = map[int]chan struct{}{}
	for i := range n {
		s.finished[i] = make(chan struct{})
	}
}

func (s *scriptedWire) Arm(worker int) {
	s.mu.Lock()
	s.armedAt[worker] = time.Now()
	s.mu.Unlock()
	s.fakeWire.Arm(worker)
}

func (s *scriptedWire) Finished(worker int) {
	s.mu.Lock()
	ch := s.finished[worker]
	s.mu.Unlock()
	close(ch)
}

// done is closed when worker's attempt of the current wave returned.
func (s *scriptedWire) done(worker int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished[worker]
}

func (s *scriptedWire) Sent(worker int) (time.Time, Sending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.silent[worker] {
		return time.Time{}, SentNothing
	}
	if s.offsets != nil {
		how := SentHeld
		if s.late[worker] {
			how = SentLate
		}
		return s.begun.Add(s.offsets[s.wave][worker]), how
	}
	return s.armedAt[worker], SentHeld
}

// Spread is the time from the first to the last attempt leaving the client,
// and a burst of several waves reports its widest wave.
func TestSpreadIsTheWidestWave(t *testing.T) {
	ms := time.Millisecond
	wire := newScriptedWire([][]time.Duration{
		{2 * ms, 9 * ms, 4 * ms}, // 7ms from first to last
		{5 * ms, 3 * ms, 4 * ms}, // 2ms
	})
	wire.late = map[int]bool{2: true}
	c := newCounter()
	c.attempt = func(_ context.Context, s Subject, w *Worker) Outcome {
		w.Mark("act")
		time.Sleep(12 * ms) // done after every request left
		return Done()
	}
	res, err := Run(context.Background(), c, Attempts(3), Bursts(1), Waves(2), Release(wire))
	if err != nil {
		t.Fatal(err)
	}
	b := res.Bursts[0]
	if b.Spread != 7*ms {
		t.Errorf("spread %s, want 7ms: the widest wave's first-to-last", b.Spread)
	}
	if b.Wire != (WireCounts{Held: 4, Late: 2}) {
		t.Errorf("wire counts %+v, want 4 held and 2 late over two waves", b.Wire)
	}
	if res.SpreadSummary() != (Summary[time.Duration]{Min: 7 * ms, Median: 7 * ms, Max: 7 * ms}) {
		t.Errorf("spread summary %+v", res.SpreadSummary())
	}
	// The trace shows each worker released when its request left.
	for _, w := range res.Example.Workers {
		want := [][]time.Duration{{2 * ms, 9 * ms, 4 * ms}, {5 * ms, 3 * ms, 4 * ms}}[w.Wave][w.Worker]
		if got := w.Marks[0].At; got < want-ms || got > want {
			t.Errorf("wave %d worker %d released at %s, want about %s", w.Wave, w.Worker, got, want)
		}
	}
}

// Through the gate, a burst's spread is exactly the first-to-last of the
// workers' "released" marks its trace shows.
func TestGateSpreadMatchesTheTrace(t *testing.T) {
	c := newCounter()
	res, err := Run(context.Background(), c, Attempts(8), Bursts(1))
	if err != nil {
		t.Fatal(err)
	}
	first, last := time.Duration(1<<62), time.Duration(0)
	for _, w := range res.Example.Workers {
		first, last = min(first, w.Marks[0].At), max(last, w.Marks[0].At)
	}
	if first <= 0 {
		t.Fatalf("first release at %s: released marks are measured after the gate opened", first)
	}
	if got := res.Bursts[0].Spread; got != last-first {
		t.Errorf("spread %s, want %s (last %s - first %s)", got, last-first, last, first)
	}
}

// A burst of several waves is only as good as its worst wave: a wave whose
// attempts ran one after another proves nothing, however well the other
// wave overlapped.
func TestOverlapIsTheWorstWave(t *testing.T) {
	const n = 4
	wire := newScriptedWire(nil)
	var barrier sync.WaitGroup
	barrier.Add(n)
	c := newCounter()
	c.attempt = func(_ context.Context, s Subject, w *Worker) Outcome {
		if w.Wave == 0 {
			// All four in flight at once: each waits for the others.
			w.Mark("act")
			barrier.Done()
			barrier.Wait()
			return Done()
		}
		// One after another: each starts well after the previous returned.
		if w.ID > 0 {
			<-wire.done(w.ID - 1)
			time.Sleep(20 * time.Millisecond)
		}
		w.Mark("act")
		return Done()
	}
	res, err := Run(context.Background(), c, Attempts(n), Bursts(1), Waves(2), Release(wire))
	if err != nil {
		t.Fatal(err)
	}
	perWave := map[int]int{}
	for _, w := range res.Example.Workers {
		perWave[w.Wave]++
	}
	if perWave[0] != n || perWave[1] != n {
		t.Fatalf("trace has %v workers per wave, want %d in each", perWave, n)
	}
	// Wave 0 overlapped fully (n); wave 1 ran its attempts 20ms apart, so
	// at most a stray scheduling delay could make two of them touch.
	if got := res.Bursts[0].Overlap; got < 1 || got >= n {
		t.Errorf("overlap %d, want the serial wave's (1, below %d): the worst wave decides", got, n)
	}
}

// Only bursts in which at least two attempts were in flight together can
// show a race; the summaries are min, median (upper) and max.
func TestOverlappedAndSummaries(t *testing.T) {
	r := &Result{Bursts: []Burst{
		{Overlap: 1, Effects: 3}, {Overlap: 2, Effects: 1}, {Overlap: 5, Effects: 2}, {Overlap: 3, Effects: 7},
	}}
	if got := r.Overlapped(); got != 3 {
		t.Errorf("overlapped %d, want 3 (overlap 2, 5 and 3)", got)
	}
	if got := r.EffectsSummary(); got != (Summary[int]{Min: 1, Median: 3, Max: 7}) {
		t.Errorf("effects summary %+v, want 1/3/7", got)
	}
	if got := r.OverlapSummary(); got != (Summary[int]{Min: 1, Median: 3, Max: 5}) {
		t.Errorf("overlap summary %+v, want 1/3/5", got)
	}
	if got := (&Result{}).EffectsSummary(); got != (Summary[int]{}) {
		t.Errorf("empty summary %+v, want zeros", got)
	}
}

// The report's wire line counts every attempt of the run by how its first
// request left, and says in how many bursts some went out late.
func TestWireNote(t *testing.T) {
	bursts := []Burst{
		{Wire: WireCounts{Held: 3}},
		{Wire: WireCounts{Held: 2, Late: 1}},
		{Wire: WireCounts{Held: 1, Late: 1, Silent: 1}},
	}
	got := wireNote("last-byte", bursts, nil)
	want := "release: last-byte — 6 of 9 attempts held back the last byte of their first request and were released together" +
		"; 2 were not synchronized: their request went out late, on its own (in 2 of 3 bursts)" +
		"; 1 sent no request once their first step began"
	if got != want {
		t.Errorf("note\n%s\nwant\n%s", got, want)
	}
	got = wireNote("last-byte", bursts[:1], nil)
	if want := "release: last-byte — 3 of 3 attempts held back the last byte of their first request and were released together"; got != want {
		t.Errorf("note\n%s\nwant\n%s", got, want)
	}
	if !bursts[0].Wire.Synchronized() || bursts[1].Wire.Synchronized() {
		t.Error("Synchronized: a wave with a late attempt is not synchronized, one without is")
	}
}

// An attempt that sent nothing on the wire is released, on its timeline,
// at its first step, or at the wave's start when it took none; only the
// attempts that sent a request count in the spread.
func TestSilentAttemptsInAWireRelease(t *testing.T) {
	ms := time.Millisecond
	wire := newScriptedWire([][]time.Duration{{2 * ms, 5 * ms, 0, 0}})
	wire.silent = map[int]bool{2: true, 3: true}
	wire.late = map[int]bool{1: true}
	c := newCounter()
	c.attempt = func(_ context.Context, s Subject, w *Worker) Outcome {
		switch w.ID {
		case 3:
			return Refused(errors.New("refused in memory")) // no step at all
		case 2:
			w.Mark("check") // a step, but nothing written
			return Refused(errors.New("refused in memory"))
		}
		w.Mark("act")
		time.Sleep(8 * ms)
		return Done()
	}
	res, err := Run(context.Background(), c, Attempts(4), Bursts(1), Release(wire))
	if err != nil {
		t.Fatal(err)
	}
	b := res.Bursts[0]
	if b.Spread != 3*ms {
		t.Errorf("spread %s, want 3ms: from the first to the last request that left", b.Spread)
	}
	if b.Wire != (WireCounts{Held: 1, Late: 1, Silent: 2}) {
		t.Errorf("wire %+v, want 1 held, 1 late, 2 silent", b.Wire)
	}
	for _, w := range res.Example.Workers {
		rel := w.Marks[0]
		switch w.Worker {
		case 3:
			if rel.At != 0 || len(w.Marks) != 2 {
				t.Errorf("worker 3 marks %v, want released at 0 then done", w.Marks)
			}
		case 2:
			if rel.At != w.Marks[1].At || w.Marks[1].Name != "check" {
				t.Errorf("worker 2 marks %v, want released at its check", w.Marks)
			}
		}
	}
}

// When no attempt sent anything, the spread is that of their first steps.
func TestAllSilentSpreadIsTheFirstSteps(t *testing.T) {
	wire := newScriptedWire(nil)
	wire.silent = map[int]bool{0: true, 1: true, 2: true}
	c := newCounter()
	c.attempt = func(_ context.Context, s Subject, w *Worker) Outcome {
		time.Sleep(time.Duration(w.ID) * time.Millisecond)
		w.Mark("check")
		return Refused(errors.New("refused in memory"))
	}
	res, err := Run(context.Background(), c, Attempts(3), Bursts(1), Release(wire))
	if err != nil {
		t.Fatal(err)
	}
	first, last := time.Duration(1<<62), time.Duration(0)
	for _, w := range res.Example.Workers {
		first, last = min(first, w.Marks[0].At), max(last, w.Marks[0].At)
	}
	if got := res.Bursts[0].Spread; got != last-first || got < 2*time.Millisecond {
		t.Errorf("spread %s, want %s: the first steps' first-to-last (at least 2ms)", got, last-first)
	}
}

// memoryTarget is memory-set in miniature: each replica keeps the subjects
// it has processed in its own memory, so a restart forgets them.
type memoryTarget struct {
	*counter
	mu       sync.Mutex
	workers  []int // the workers argument of each Open, in order
	sessions int   // open sessions
}

type memoryApp struct {
	t    *memoryTarget
	mu   sync.Mutex
	seen map[string]bool
}

type memorySession struct{ a *memoryApp }

func (m *memoryTarget) Open(_ context.Context, _ int, workers int) (App, error) {
	m.mu.Lock()
	m.workers = append(m.workers, workers)
	m.mu.Unlock()
	m.opens.Add(1)
	return &memoryApp{t: m, seen: map[string]bool{}}, nil
}

func (a *memoryApp) Session(context.Context, int) (Session, error) {
	a.t.mu.Lock()
	a.t.sessions++
	a.t.mu.Unlock()
	return &memorySession{a}, nil
}
func (a *memoryApp) Close() error { a.t.closes.Add(1); return nil }

func (s *memorySession) Close() error {
	s.a.t.mu.Lock()
	s.a.t.sessions--
	s.a.t.mu.Unlock()
	return nil
}

func (s *memorySession) Attempt(_ context.Context, sub Subject, w *Worker) Outcome {
	w.Mark("check")
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	if s.a.seen[sub.Key] {
		return Refused(errors.New("already processing"))
	}
	s.a.seen[sub.Key] = true
	s.a.t.counter.mu.Lock()
	s.a.t.effects[sub.Key]++
	s.a.t.counter.mu.Unlock()
	return Done()
}

// A deploy between waves wipes every replica's memory, so the second wave
// runs the action again: that is memory-set's lesson, and the runner must
// restart the replicas exactly between waves, not before the first.
func TestDeployWipesMemoryBetweenWaves(t *testing.T) {
	for _, tc := range []struct {
		deploy bool
		want   int
	}{{true, 2}, {false, 1}} {
		m := &memoryTarget{counter: newCounter()}
		res, err := Run(context.Background(), m, Attempts(3), Bursts(2), Waves(2), Deploy(tc.deploy))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.EffectsSummary(); got.Min != tc.want || got.Max != tc.want {
			t.Errorf("deploy=%v: effects %+v per burst, want %d", tc.deploy, got, tc.want)
		}
		if m.sessions != 0 {
			t.Errorf("deploy=%v: %d sessions left open", tc.deploy, m.sessions)
		}
	}
}

// Each replica is opened for the workers that use it (worker i uses
// replica i mod R), so it can size its pool to them.
func TestReplicaPoolsFitTheirWorkers(t *testing.T) {
	m := &memoryTarget{counter: newCounter()}
	if _, err := Run(context.Background(), m, Attempts(7), Bursts(1), Replicas(3)); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(m.workers) != "[3 2 2]" {
		t.Errorf("replicas opened for %v workers, want [3 2 2] (7 workers over 3 replicas)", m.workers)
	}
	if m.sessions != 0 || m.opens.Load() != m.closes.Load() {
		t.Errorf("%d sessions left open; %d replicas opened, %d closed", m.sessions, m.opens.Load(), m.closes.Load())
	}
}

// The smallest shape is valid; one below it in any field is not, and the
// error names the field.
func TestValidateBoundaries(t *testing.T) {
	if _, err := Run(context.Background(), newCounter(),
		Attempts(1), Bursts(1), Replicas(1), Waves(1), Allowed(0), Required(0), Timeout(0)); err != nil {
		t.Errorf("the smallest valid shape was refused: %v", err)
	}
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{Attempts(0), "attempts must be at least 1 (got 0)"},
		{Bursts(0), "bursts must be at least 1 (got 0)"},
		{Replicas(0), "replicas must be at least 1 (got 0)"},
		{Waves(0), "waves must be at least 1 (got 0)"},
		{Allowed(-1), "allowed effects cannot be negative (got -1)"},
		{Required(-1), "required effects must be between 0 and the 1 allowed (got -1)"},
		{Required(2), "required effects must be between 0 and the 1 allowed (got 2)"},
		{Timeout(-time.Second), "timeout cannot be negative (got -1s)"},
	} {
		c := newCounter()
		_, err := Run(context.Background(), c, tc.opt)
		if err == nil || err.Error() != tc.want {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
		if c.prepared {
			t.Errorf("%s: the target was prepared for a run that cannot be carried out", tc.want)
		}
	}
}

func TestClassNames(t *testing.T) {
	var got []string
	for _, c := range Classes() {
		got = append(got, c.String())
	}
	if fmt.Sprint(got) != "[executed declined conflict error unknown]" || Class(NumClasses).String() != "class(5)" {
		t.Errorf("class names %v, %s", got, Class(NumClasses))
	}
}

// A burst is lost when it left fewer effects than required while some
// attempt claimed the action done (executed, or declined as "already
// done"); a burst whose attempts all failed claimed nothing.
func TestLostNeedsAClaim(t *testing.T) {
	for _, tc := range []struct {
		name     string
		effects  int
		outcomes [NumClasses]int
		lost     bool
	}{
		{"declined, nothing stored", 0, [NumClasses]int{Declined: 3}, true},
		{"executed, nothing stored", 0, [NumClasses]int{Executed: 1, Error: 2}, true},
		{"one stored", 1, [NumClasses]int{Executed: 1, Declined: 2}, false},
		{"all failed", 0, [NumClasses]int{Error: 2, Unknown: 1, Conflict: 1}, false},
	} {
		b := Burst{Effects: tc.effects, Allowed: 1, Required: 1, Outcomes: tc.outcomes}
		if b.Lost() != tc.lost {
			t.Errorf("%s: lost = %v, want %v", tc.name, b.Lost(), tc.lost)
		}
		r := &Result{Bursts: []Burst{b, b, {Effects: 1, Allowed: 1, Required: 1}}}
		if want := map[bool]int{true: 2}[tc.lost]; r.Lost() != want {
			t.Errorf("%s: result lost %d, want %d", tc.name, r.Lost(), want)
		}
	}
}

// Only a burst that put the guard to the test can support SAFE: an attempt
// executed, two attempts were in flight at once, and two got an answer —
// judged from the outcomes, whatever the effects.
func TestTestedBursts(t *testing.T) {
	answered := [NumClasses]int{Executed: 1, Declined: 1, Error: 3, Unknown: 3}
	for _, tc := range []struct {
		name string
		b    Burst
		want bool
	}{
		{"tested", Burst{Effects: 1, Overlap: 2, Outcomes: answered}, true},
		{"a conflict is an answer", Burst{Effects: 1, Overlap: 2, Outcomes: [NumClasses]int{Executed: 1, Conflict: 1}}, true},
		{"no effect counted: the outcomes decide", Burst{Effects: 0, Overlap: 2, Outcomes: answered}, true},
		{"nothing executed", Burst{Effects: 1, Overlap: 2, Outcomes: [NumClasses]int{Declined: 2, Conflict: 1}}, false},
		{"never overlapped", Burst{Effects: 1, Overlap: 1, Outcomes: answered}, false},
		{"one answer", Burst{Effects: 1, Overlap: 5, Outcomes: [NumClasses]int{Executed: 1, Error: 2, Unknown: 2}}, false},
		{"judged by nothing: its invariants were broken before it", Burst{Overlap: 2, Outcomes: answered, Unjudged: []bool{true}, Unobserved: true}, false},
		{"an invariant broken before, the effects judged it", Burst{Effects: 1, Overlap: 2, Outcomes: answered, Unjudged: []bool{true}}, true},
	} {
		if got := tc.b.Tested(); got != tc.want {
			t.Errorf("%s: tested = %v, want %v", tc.name, got, tc.want)
		}
	}
	every := Burst{Outcomes: [NumClasses]int{Executed: 1, Declined: 1, Conflict: 1, Error: 4, Unknown: 5}}
	if got := every.Answered(); got != 3 {
		t.Errorf("answered %d, want 3 (executed, declined, conflict; not error or unknown)", got)
	}
	r := &Result{Bursts: []Burst{
		{Effects: 1, Overlap: 2, Outcomes: answered}, {Effects: 0, Overlap: 1, Outcomes: answered}, {Effects: 2, Overlap: 3, Outcomes: answered},
	}}
	if r.Tested() != 2 {
		t.Errorf("result tested %d, want 2", r.Tested())
	}
}

type diagnosing struct{ *counter }

func (diagnosing) Diagnose() string { return "no request succeeded: 404 ×6" }

// The run carries what a report needs to explain itself: the floor, the
// timeout, and the target's own diagnosis.
func TestResultCarriesTheRunsTerms(t *testing.T) {
	c := newCounter()
	c.effectsOverride = func(Subject) int { return 0 }
	res, err := Run(context.Background(), diagnosing{c}, Attempts(3), Bursts(2), Allowed(2), Required(1), Timeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if res.Required != 1 || res.Allowed != 2 || res.Timeout != time.Minute || res.Diagnosis != "no request succeeded: 404 ×6" {
		t.Errorf("result: required %d allowed %d timeout %s diagnosis %q", res.Required, res.Allowed, res.Timeout, res.Diagnosis)
	}
	// Every attempt executed, the store saw nothing: lost, in every burst.
	if res.Lost() != 2 || res.Bursts[0].Required != 1 {
		t.Errorf("lost %d (burst required %d), want 2 and 1", res.Lost(), res.Bursts[0].Required)
	}
}

// A burst whose policy allows no effect at all requires none either.
func TestAllowanceOfZeroRequiresNothing(t *testing.T) {
	c := newCounter()
	c.effectsOverride = func(Subject) int { return 0 }
	res, err := Run(context.Background(), allowingNone{c}, Attempts(2), Bursts(1))
	if err != nil {
		t.Fatal(err)
	}
	if b := res.Bursts[0]; b.Allowed != 0 || b.Required != 0 || res.Lost() != 0 {
		t.Errorf("burst allowed %d required %d, lost %d; want 0, 0, 0", b.Allowed, b.Required, res.Lost())
	}
}

type allowingNone struct{ *counter }

func (allowingNone) Allowed(Subject, [NumClasses]int) int { return 0 }
