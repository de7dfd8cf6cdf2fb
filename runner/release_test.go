package runner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeWire stands in for the release package's wire: it records what the
// runner asks of it and says every armed attempt was held and released at
// the moment Release ran. The real wire is tested with the real drivers in
// the release package.
type fakeWire struct {
	notReady error

	mu       sync.Mutex
	claims   []int
	tagged   map[int]bool
	armed    map[int]int
	finished map[int]int
	released time.Time
}

type fakeKey struct{}

func newFakeWire() *fakeWire {
	return &fakeWire{tagged: map[int]bool{}, armed: map[int]int{}, finished: map[int]int{}}
}

func (f *fakeWire) Name() string { return "fake-wire" }
func (f *fakeWire) Context(ctx context.Context, worker int) context.Context {
	return context.WithValue(ctx, fakeKey{}, worker)
}
func (f *fakeWire) Claim(worker int) func() {
	f.mu.Lock()
	f.claims = append(f.claims, worker)
	f.mu.Unlock()
	return func() {}
}
func (f *fakeWire) Ready(int) error { return f.notReady }
func (f *fakeWire) Begin(int)       {}
func (f *fakeWire) Arm(worker int) {
	f.mu.Lock()
	f.armed[worker]++
	f.mu.Unlock()
}
func (f *fakeWire) Finished(worker int) {
	f.mu.Lock()
	f.finished[worker]++
	f.mu.Unlock()
}
func (f *fakeWire) Release(context.Context) {
	f.mu.Lock()
	f.released = time.Now()
	f.mu.Unlock()
}
func (f *fakeWire) Sent(worker int) (time.Time, Sending) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed[worker] == 0 {
		return time.Time{}, SentNothing
	}
	return f.released, SentHeld
}

func TestWireReleaseRunsEveryAttemptAndCountsHowTheyLeft(t *testing.T) {
	const n, bursts = 4, 3
	c := newCounter()
	f := newFakeWire()
	c.attempt = func(ctx context.Context, s Subject, w *Worker) Outcome {
		if ctx.Value(fakeKey{}) != w.ID {
			t.Errorf("worker %d's attempt context is not tagged with it", w.ID)
		}
		if w.ID == 0 {
			return Refused(errors.New("refused before its first step")) // never marks
		}
		w.Mark("check")
		w.Mark("act")
		c.mu.Lock()
		c.effects[s.Key]++
		c.mu.Unlock()
		return Done()
	}
	res, err := Run(context.Background(), c, Attempts(n), Bursts(bursts), Release(f))
	if err != nil {
		t.Fatal(err)
	}
	if res.Release != "fake-wire" {
		t.Errorf("Release = %q, want the wire's name", res.Release)
	}
	if len(f.claims) != n {
		t.Errorf("claims %v, want one per worker's session", f.claims)
	}
	for w := 1; w < n; w++ {
		if f.armed[w] != bursts || f.finished[w] != bursts {
			t.Errorf("worker %d armed %d, finished %d times; want once per burst (at its first mark only)", w, f.armed[w], f.finished[w])
		}
	}
	if f.armed[0] != 0 || f.finished[0] != bursts {
		t.Errorf("worker 0 (no mark) armed %d, finished %d times; want 0 and %d", f.armed[0], f.finished[0], bursts)
	}
	for _, b := range res.Bursts {
		if b.Wire != (WireCounts{Held: n - 1, Silent: 1}) {
			t.Errorf("burst %d: wire %+v, want %d held and 1 silent", b.Index, b.Wire, n-1)
		}
		if b.Effects != n-1 {
			t.Errorf("burst %d: %d effects, want %d", b.Index, b.Effects, n-1)
		}
	}
	for _, w := range res.Example.Workers {
		if w.Marks[0].Name != "released" || w.Marks[len(w.Marks)-1].Name != "done" {
			t.Errorf("worker %d marks %v: want released first and done last", w.Worker, w.Marks)
		}
	}
	note := strings.Join(res.Notes, "\n")
	if !strings.Contains(note, "release: fake-wire — 9 of 12 attempts held back") || !strings.Contains(note, "3 sent no request") {
		t.Errorf("notes %q, want the wire counts", res.Notes)
	}
}

// A wire that cannot tell the workers' connections apart falls back to the
// gate, and the report says so.
func TestWireReleaseFallsBackToTheGate(t *testing.T) {
	c := newCounter()
	f := newFakeWire()
	f.notReady = errors.New("worker 0 has no connection of its own")
	res, err := Run(context.Background(), c, Attempts(3), Bursts(2), Release(f))
	if err != nil {
		t.Fatal(err)
	}
	if res.Release != GateRelease || len(f.armed) != 0 {
		t.Errorf("Release = %q, armed %v; want the gate and nothing armed", res.Release, f.armed)
	}
	note := strings.Join(res.Notes, "\n")
	if !strings.Contains(note, "fake-wire was asked for, but worker 0 has no connection of its own") ||
		!strings.Contains(note, "through the gate instead") {
		t.Errorf("notes %q, want the fallback said", res.Notes)
	}
	if len(res.Bursts) != 2 || res.Bursts[0].Overlap < 1 {
		t.Errorf("bursts %+v: the run must go on through the gate", res.Bursts)
	}
}

func TestNoteOptionReachesTheReport(t *testing.T) {
	res, err := Run(context.Background(), newCounter(), Attempts(2), Bursts(1), Note("release: last-byte does not apply here"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notes) != 1 || res.Notes[0] != "release: last-byte does not apply here" || res.Release != GateRelease {
		t.Errorf("notes %q, release %q", res.Notes, res.Release)
	}
}
