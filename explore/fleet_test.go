package explore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// skipper checks, then acts when the work is not done yet, or takes a
// second step of its own ("skip") when it is: as many steps either way,
// by another path after another attempt than alone.
func skipper(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	if st.count(s.Key) > 0 {
		w.Step(ctx, "skip")
		return runner.Refused(errors.New("already"))
	}
	w.Step(ctx, "act")
	st.add(s.Key)
	return runner.Done()
}

// An attempt is planned with its path alone when another path after
// another attempt is no longer: "took other steps than it took alone"
// (Diverged) is measured against it.
func TestAnAttemptIsPlannedWithItsPathAlone(t *testing.T) {
	res, err := Run(context.Background(), newStore(skipper), Options{Attempts: 2, BlockAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"check", "act"}, {"check", "act"}}
	if !slices.EqualFunc(res.AttemptSteps, want, slices.Equal) {
		t.Errorf("attempts planned with %q, want each with its path alone %q", res.AttemptSteps, want)
	}
	if got := res.Shape(); got != "2 attempts × 2 steps (check, act)" {
		t.Errorf("shape %q", got)
	}
}

// Attempts that run different statements: Steps (the JSON's "steps") are
// the first longest attempt's, and the shape names each attempt's own.
func TestStepsAreTheFirstLongestAttempts(t *testing.T) {
	st := newStore(func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
		names := [][]string{{"read", "write"}, {"get", "put"}}[w.ID]
		for _, n := range names {
			w.Step(ctx, n)
		}
		return runner.Done()
	})
	res, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Steps, []string{"read", "write"}) {
		t.Errorf("steps %q, want A's (read, write): the first of the longest", res.Steps)
	}
	if got, want := res.Shape(), "A: 2 steps (read, write); B: 2 steps (get, put)"; got != want {
		t.Errorf("shape %q, want %q", got, want)
	}
}

// fleetStore records how the exploration opened its replicas and
// sessions, and on which replica each attempt ran.
type fleetStore struct {
	*store
	mu       sync.Mutex
	shares   []string // "replica:share" per Open
	sessions []string // "replica:attempt" per Session
	replicas map[int]int
}

func (f *fleetStore) Open(_ context.Context, replica, share int) (runner.App, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shares = append(f.shares, fmt.Sprintf("%d:%d", replica, share))
	return fleetApp{f, replica}, nil
}

type fleetApp struct {
	f       *fleetStore
	replica int
}

func (a fleetApp) Session(_ context.Context, i int) (runner.Session, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	a.f.sessions = append(a.f.sessions, fmt.Sprintf("%d:%d", a.replica, i))
	return sess{a.f.store}, nil
}
func (fleetApp) Close() error { return nil }

// Attempt i runs on replica i mod Replicas, and each replica is opened for
// its share of the attempts (the pool a server-backed replica sizes).
func TestEachReplicaOpensForItsShareOfTheAttempts(t *testing.T) {
	for _, c := range []struct {
		n, r             int
		shares, sessions string
	}{
		{3, 2, "0:2 1:1", "0:0 1:1 0:2"},
		{4, 3, "0:2 1:1 2:1", "0:0 1:1 2:2 0:3"},
		{2, 1, "0:2", "0:0 0:1"},
	} {
		f := &fleetStore{replicas: map[int]int{}}
		f.store = newStore(func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
			f.mu.Lock()
			f.replicas[w.ID] = w.Replica
			f.mu.Unlock()
			w.Step(ctx, "act")
			return runner.Done()
		})
		if _, err := Run(context.Background(), f, Options{Attempts: c.n, Replicas: c.r, BlockAfter: time.Second}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(f.shares, " "); got != c.shares {
			t.Errorf("%d attempts on %d replicas: opened replica:share %s, want %s", c.n, c.r, got, c.shares)
		}
		if got := strings.Join(f.sessions, " "); got != c.sessions {
			t.Errorf("%d attempts on %d replicas: sessions replica:attempt %s, want %s", c.n, c.r, got, c.sessions)
		}
		for w := range c.n {
			if f.replicas[w] != w%c.r {
				t.Errorf("%d attempts on %d replicas: attempt %s ran on replica %d, want %d", c.n, c.r, Letter(w), f.replicas[w], w%c.r)
			}
		}
	}
}

// An attempt that fails on its own is an error; one whose driver gives up
// with some other error after the attempt timed out is unknown (it may
// have been applied), as a burst counts it.
func TestAFailureAfterTheTimeoutIsUnknown(t *testing.T) {
	st := newStore(func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
		w.Step(ctx, "act")
		if w.ID == 0 {
			return runner.Failed(errors.New("syntax error"))
		}
		<-ctx.Done()
		return runner.Failed(errors.New("bad connection"))
	})
	res, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: 200 * time.Millisecond, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orders) == 0 {
		t.Fatal("no order ran")
	}
	for _, o := range res.Orders {
		if len(o.Attempts) != 2 || o.Attempts[0].Outcome != runner.Error || o.Attempts[1].Outcome != runner.Unknown || o.Abandoned != 1 {
			t.Fatalf("order %s: attempts %+v, %d abandoned; want A an error, B unknown (1 abandoned)", o.Schedule, o.Attempts, o.Abandoned)
		}
	}
}

// A conflict is a deadlock when the target's Deadlock says so; an attempt
// the guard refused is neither, whatever its error says; without Deadlock
// every conflict is a conflict.
func TestDeadlocksAreTheConflictsTheTargetNames(t *testing.T) {
	isDeadlock := func(err error) bool { return strings.Contains(err.Error(), "deadlock") }
	for _, c := range []struct {
		name              string
		a, b              runner.Outcome
		deadlock          func(error) bool
		deadlocked, confl int
		flagA, flagB      bool
	}{
		{"a deadlock and a serialization failure", runner.Retry(errors.New("deadlock detected")), runner.Retry(errors.New("could not serialize access")), isDeadlock, 1, 1, true, false},
		{"a refusal that mentions a deadlock", runner.Refused(errors.New("deadlock detected")), runner.Done(), isDeadlock, 0, 0, false, false},
		{"no Deadlock given", runner.Retry(errors.New("deadlock detected")), runner.Done(), nil, 0, 1, false, false},
	} {
		st := newStore(func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
			w.Step(ctx, "act")
			return []runner.Outcome{c.a, c.b}[w.ID]
		})
		res, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: time.Second, Deadlock: c.deadlock})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Orders {
			if o.Deadlocked != c.deadlocked || o.Conflicts != c.confl || o.Attempts[0].Deadlock != c.flagA || o.Attempts[1].Deadlock != c.flagB {
				t.Errorf("%s, order %s: %d deadlocked, %d conflicts, flags %v %v; want %d, %d, %v %v",
					c.name, o.Schedule, o.Deadlocked, o.Conflicts, o.Attempts[0].Deadlock, o.Attempts[1].Deadlock, c.deadlocked, c.confl, c.flagA, c.flagB)
			}
		}
	}
}

// allowStore allows one effect more than the attempts that executed, and
// requires as many as executed: the outcomes an order hands its target
// are counted per class.
type allowStore struct{ *store }

func (allowStore) Allowed(_ runner.Subject, out [runner.NumClasses]int) int {
	return 1 + out[runner.Executed]
}
func (allowStore) Required(_ runner.Subject, out [runner.NumClasses]int) int {
	return out[runner.Executed] + 10*out[runner.Declined]
}

func TestAnOrderHandsItsOutcomesToTheTarget(t *testing.T) {
	res, err := Run(context.Background(), allowStore{newStore(naive)}, Options{Attempts: 2, BlockAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, o := range res.Orders {
		executed, declined := 0, 0
		for _, a := range o.Attempts {
			executed += b2i(a.Outcome == runner.Executed)
			declined += b2i(a.Outcome == runner.Declined)
		}
		seen[executed] = true
		if o.Allowed != 1+executed || o.Required != executed+10*declined {
			t.Errorf("order %s: %d executed, %d declined; allowed %d, required %d, want %d and %d",
				o.Schedule, executed, declined, o.Allowed, o.Required, 1+executed, executed+10*declined)
		}
	}
	if !seen[1] || !seen[2] {
		t.Errorf("orders with 1 and with 2 executed attempts: saw %v", seen)
	}
}

// noteStore is a target with notes of its own.
type noteStore struct{ *store }

func (noteStore) Notes() []string { return []string{"target: a note"} }

// The notes are the target's, then how blocked steps were told; no empty
// line (the reduction's line is tested in TestReductionGivesTheVerdictOfEveryOrder).
func TestNotesAreTheTargetsThenTheBlockingRule(t *testing.T) {
	res, err := Run(context.Background(), noteStore{newStore(naive)}, Options{Attempts: 2, BlockAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notes) != 2 || res.Notes[0] != "target: a note" || !strings.Contains(res.Notes[1], "--block-after 1s counts as blocked") {
		t.Errorf("notes %q, want the target's, then the timer's rule", res.Notes)
	}
}

// failStore fails one call of its kind: the n-th Reset (from 1), the
// first Effects, or the Session of attempt session on its replica.
type failStore struct {
	*store
	resetAt, resets int
	effects         bool
	session         int
}

func (f *failStore) Reset(ctx context.Context, b int) (runner.Subject, error) {
	if f.resets++; f.resets == f.resetAt {
		return runner.Subject{}, errors.New("boom")
	}
	return f.store.Reset(ctx, b)
}

func (f *failStore) Effects(ctx context.Context, s runner.Subject) (int, error) {
	if f.effects {
		return 0, errors.New("boom")
	}
	return f.store.Effects(ctx, s)
}

func (f *failStore) Open(context.Context, int, int) (runner.App, error) {
	return failApp{f}, nil
}

type failApp struct{ f *failStore }

func (a failApp) Session(_ context.Context, i int) (runner.Session, error) {
	if i == a.f.session {
		return nil, errors.New("boom")
	}
	return sess{a.f.store}, nil
}
func (failApp) Close() error { return nil }

// A failure names the order (from 1), or the replica and the attempt, it
// happened in.
func TestAFailureNamesItsOrder(t *testing.T) {
	for _, c := range []struct {
		f    *failStore
		want string
	}{
		{&failStore{resetAt: 2, session: -1}, "order 2: reset: boom"},
		{&failStore{effects: true, session: -1}, "order 1: count effects: boom"},
		{&failStore{session: 3}, "replica 1, attempt D: boom"},
	} {
		c.f.store = newStore(naive)
		_, err := Run(context.Background(), c.f, Options{Attempts: 4, Replicas: 2, BlockAfter: time.Second})
		if err == nil || err.Error() != c.want {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}

// An attempt that outlives its timeout and the grace after it makes the
// order's error, named after the order.
func TestAHungOrderIsNamed(t *testing.T) {
	defer func(g time.Duration) { hangGrace = g }(hangGrace)
	hangGrace = 50 * time.Millisecond
	release := make(chan struct{})
	defer close(release)
	st := newStore(func(ctx context.Context, st *store, s runner.Subject, w *runner.Worker) runner.Outcome {
		w.Step(ctx, "act")
		if w.ID == 1 {
			<-release // ignores its context
		}
		return runner.Done()
	})
	_, err := Run(context.Background(), st, Options{Attempts: 2, BlockAfter: 20 * time.Millisecond, Timeout: 100 * time.Millisecond})
	if !errors.Is(err, runner.ErrHung) || !strings.HasPrefix(err.Error(), "order 1: ") {
		t.Errorf("error %v, want order 1's, wrapping runner.ErrHung", err)
	}
}
