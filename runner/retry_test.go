package runner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// conflicting is a store that refuses each worker's first refusals tries
// with a conflict and then lets the attempt through.
func conflicting(refusals int) (*counter, func() int) {
	c := newCounter()
	var mu sync.Mutex
	tries := map[[2]int]int{} // burst, worker → tries
	calls := 0
	c.attempt = func(_ context.Context, s Subject, w *Worker) Outcome {
		mu.Lock()
		defer mu.Unlock()
		calls++
		k := [2]int{s.Burst, w.ID}
		tries[k]++
		if tries[k] <= refusals {
			return Retry(errors.New("40001"))
		}
		c.mu.Lock()
		c.effects[s.Key]++
		c.mu.Unlock()
		return Done()
	}
	return c, func() int { mu.Lock(); defer mu.Unlock(); return calls }
}

func TestRetriesConflicts(t *testing.T) {
	c, calls := conflicting(2)
	res, err := Run(context.Background(), allowing{c}, Attempts(3), Bursts(2), Retries(5))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Outcomes()[Executed]; got != 6 {
		t.Errorf("executed %d, want all 6 attempts after their retries (outcomes %v)", got, res.Outcomes())
	}
	if res.Retries() != 12 || res.Bursts[0].Retries != 6 || calls() != 18 {
		t.Errorf("retries %d (burst 0: %d), calls %d; want 12 (6), 18", res.Retries(), res.Bursts[0].Retries, calls())
	}
	if n := strings.Join(res.Notes, "\n"); !strings.Contains(n, "12 conflicts retried (up to 5 per attempt); every attempt reached a decision") {
		t.Errorf("notes: %q", n)
	}
	for _, m := range res.Example.Workers[0].Marks {
		if m.Name == "retry" {
			return
		}
	}
	t.Errorf("the trace has no retry mark: %+v", res.Example.Workers[0].Marks)
}

func TestRetriesGiveUp(t *testing.T) {
	c, calls := conflicting(10)
	res, err := Run(context.Background(), allowing{c}, Attempts(2), Bursts(1), Retries(3))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Outcomes()[Conflict]; got != 2 || calls() != 8 {
		t.Errorf("conflicts %d after %d calls, want 2 after 8 (1 + 3 retries each)", got, calls())
	}
	if n := strings.Join(res.Notes, "\n"); !strings.Contains(n, "2 attempts still in conflict after 3 retries") {
		t.Errorf("notes: %q", n)
	}
}

func TestNoRetryByDefault(t *testing.T) {
	c, calls := conflicting(1)
	res, err := Run(context.Background(), c, Attempts(2), Bursts(1))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcomes()[Conflict] != 2 || calls() != 2 || len(res.Notes) != 0 {
		t.Errorf("outcomes %v after %d calls, notes %q: want 2 conflicts, 2 calls, no note", res.Outcomes(), calls(), res.Notes)
	}
}

// requiring requires every attempt that executed to have left an effect.
type requiring struct{ *counter }

func (requiring) Allowed(_ Subject, o [NumClasses]int) int  { return o[Executed] }
func (requiring) Required(_ Subject, o [NumClasses]int) int { return o[Executed] }

func TestRequirer(t *testing.T) {
	c := newCounter()
	c.effectsOverride = func(Subject) int { return 1 } // 3 executed, 1 landed
	res, err := Run(context.Background(), requiring{c}, Attempts(3), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Lost() != 2 || res.Bursts[0].Required != 3 || res.Violations() != 0 {
		t.Errorf("lost %d, required %d, violations %d: want 2, 3, 0", res.Lost(), res.Bursts[0].Required, res.Violations())
	}
}

func TestNegativeRetriesRefused(t *testing.T) {
	c := NewConfig(Retries(-1))
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "retries cannot be negative") {
		t.Fatalf("Validate() = %v, want the negative retries refused", err)
	}
}

// A retry's pause is drawn below a limit that doubles from 500 µs with
// each retry and stops at retryBackoff (32 ms), however many retries.
func TestBackoffLimitDoublesUpToItsCap(t *testing.T) {
	want := []time.Duration{1: 500 * time.Microsecond, 2: time.Millisecond, 3: 2 * time.Millisecond, 6: 16 * time.Millisecond, 7: 32 * time.Millisecond, 8: 32 * time.Millisecond, 11: 32 * time.Millisecond, 60: 32 * time.Millisecond}
	for n, w := range want {
		if w == 0 {
			continue
		}
		if got := backoffLimit(n); got != w {
			t.Errorf("backoffLimit(%d) = %v, want %v", n, got, w)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backoff(ctx, 60); err == nil {
		t.Error("backoff waited out its pause after the run was cancelled")
	}
}
