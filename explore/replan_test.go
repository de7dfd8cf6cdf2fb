package explore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// brancher counts the subject up and reads it again: only when another
// attempt counted it up in between (never in a serial order) does it
// check, then add, an effect.
func brancher() func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
	var mu sync.Mutex
	bumps := map[string]int{}
	read := func(k string) int { mu.Lock(); defer mu.Unlock(); return bumps[k] }
	return func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
		w.Step(ctx, "read")
		before := read(s.Key)
		w.Step(ctx, "bump")
		mu.Lock()
		bumps[s.Key]++
		mu.Unlock()
		w.Step(ctx, "reread")
		if read(s.Key)-before > 1 {
			w.Step(ctx, "check")
			if st.count(s.Key) == 0 {
				w.Step(ctx, "insert")
				st.add(s.Key)
			}
		}
		return runner.Done()
	}
}

// An attempt that branches into steps its plan does not have, after
// another attempt's steps, is planned again with the longest path each
// attempt took, and the orders that put those steps among the other's
// run: two attempts that both check before either inserts race. Planned
// with the 3 steps each takes alone, the branch's steps ran after every
// planned one and the exploration said SAFE.
func TestAnUnplannedBranchIsPlannedAgain(t *testing.T) {
	res, err := Run(context.Background(), newStore(brancher()), Options{Attempts: 2, BlockAfter: time.Second, Allowed: 1, AllowanceSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict() != Race || res.Replanned != 1 || res.Total != "252" || len(res.AttemptSteps[0]) != 5 {
		t.Fatalf("verdict %s (%s), planned again %d times, %s orders of %s: want RACE over the orders of 5 steps each",
			res.Verdict(), res.Why(), res.Replanned, res.Total, res.Shape())
	}
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "planned again (round 2): attempt") {
		t.Errorf("no note says the attempts were planned again:\n%s", notes)
	}
}

// When the orders planned again are more than --max-schedules, the
// orders that ran stand, and the steps past the plan keep the verdict
// INCONCLUSIVE (never SAFE), said in one line.
func TestAnUnplannedBranchTooLargeToPlanAgainIsInconclusive(t *testing.T) {
	res, err := Run(context.Background(), newStore(brancher()), Options{Attempts: 2, BlockAfter: time.Second, MaxSchedules: 25, Allowed: 1, AllowanceSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict() != Inconclusive || !strings.Contains(res.Why(), "took steps its plan does not have (first: attempt") ||
		res.Replanned != 0 || res.Total != "20" {
		t.Fatalf("verdict %s (%s), planned again %d, %s orders: want INCONCLUSIVE over the first plan's 20", res.Verdict(), res.Why(), res.Replanned, res.Total)
	}
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "not planned again: attempt") || !strings.Contains(notes, "more than --max-schedules 25") {
		t.Errorf("no note says why it was not planned again:\n%s", notes)
	}
}

// raceThenMore is naive, and after a double grant takes a step its plan
// (made from serial runs, where there is none) does not have.
func raceThenMore(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	if st.count(s.Key) > 0 {
		return runner.Refused(errors.New("already"))
	}
	w.Step(ctx, "act")
	st.add(s.Key)
	w.Step(ctx, "look")
	if st.count(s.Key) > 1 {
		w.Step(ctx, "after")
	}
	w.Step(ctx, "done")
	return runner.Done()
}

// A violation found stands as it is: an exploration that found a RACE is
// not planned again, though an attempt took steps past its plan.
func TestARaceIsNotPlannedAgain(t *testing.T) {
	res, err := Run(context.Background(), newStore(raceThenMore), Options{Attempts: 2, BlockAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict() != Race || res.Unplanned == 0 || res.Replanned != 0 {
		t.Fatalf("verdict %s, %d unplanned steps, planned again %d times: want RACE, some steps past the plan, and no second plan", res.Verdict(), res.Unplanned, res.Replanned)
	}
}
