package memstore

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target      = (*target)(nil)
	_ runner.Noter       = (*target)(nil)
	_ runner.Checker     = (*target)(nil)
	_ runner.Snapshotter = (*target)(nil)
)

// Name is the embedded backend's name.
const Name = "memory"

// Register adds the embedded backend and its scenarios to r.
func Register(r *scenarios.Registry) {
	r.AddBackend(scenarios.Backend{Name: Name, Summary: "embedded in-process store with a simulated round trip (no server needed)",
		// An attempt here is its worker, goroutine and marks (about 5 KiB,
		// measured with 'racetest run unique-insert -n 100000 --latency 0':
		// 520 MB), and no connection.
		AttemptCost: 6 << 10})
	for name, a := range map[string]attemptFunc{
		scenarios.MemorySet:         memorySet,
		scenarios.CheckThenWrite:    checkThenWrite,
		scenarios.ConditionalUpdate: conditionalUpdate,
		scenarios.UniqueInsert:      uniqueInsert,
		scenarios.TTLLease:          ttlLease,
	} {
		r.Register(name, Name, factory(name, a))
	}
}

type attemptFunc func(ctx context.Context, t *target, a *app, s runner.Subject, w *runner.Worker) runner.Outcome

func factory(name string, attempt attemptFunc) scenarios.Factory {
	return func(_ context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if p.Variant != "" {
			return nil, scenarios.BadParam(fmt.Errorf("memory: %s has no variant %q on the embedded store; drop --variant", name, p.Variant))
		}
		if err := scenarios.NoIsolation(name, p); err != nil {
			return nil, err
		}
		if p.TTL == 0 {
			p.TTL = scenarios.DefaultTTL
		}
		t := &target{name: name, p: p, attempt: attempt}
		t.store = t.newStore()
		return t, nil
	}
}

// target is one scenario on the embedded store.
type target struct {
	name    string
	p       scenarios.Params
	store   *Store
	attempt attemptFunc
}

func (t *target) Prepare(context.Context) error { return nil }

func (t *target) Cleanup(context.Context) error {
	t.store = t.newStore()
	return nil
}

func (t *target) newStore() *Store {
	st := NewStore(t.p.Latency)
	if t.p.Seed != 0 {
		st.Seed(t.p.Seed)
	}
	return st
}

func (t *target) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	key := t.p.Prefix() + strconv.Itoa(burst)
	s := runner.Subject{Burst: burst, Key: key}
	if t.name == scenarios.ConditionalUpdate {
		// The coupon exists, issued, before the burst: setup, not an attempt.
		t.store.mu.Lock()
		t.store.values[key] = "issued"
		t.store.mu.Unlock()
	}
	return s, nil
}

func (t *target) Effects(_ context.Context, s runner.Subject) (int, error) {
	if t.name == scenarios.TTLLease {
		return t.store.Holders(s.Key), nil
	}
	return t.store.Rows(s.Key), nil
}

// Snapshot measures the whole store for --effects auto, as racetest
// measures a database's tables: "writes" holds a row per write (an insert,
// an applied compare-and-set). Each run's target has a store of its own:
// nothing else writes to it.
//
// ttl-lease cannot be judged so: its failure is two holders of one lease
// at once, which no change of the store shows (a lease that expired and
// was granted again is the design working), so it refuses.
func (t *target) Snapshot(context.Context) (runner.Snapshot, error) {
	if t.name == scenarios.TTLLease {
		return nil, &runner.SnapshotError{Msg: AutoRefusal(t.name)}
	}
	st := t.store
	st.mu.Lock()
	defer st.mu.Unlock()
	var writes int64
	for _, n := range st.rows {
		writes += int64(n)
	}
	return runner.Snapshot{"writes" + runner.RowsSuffix: big.NewRat(writes, 1)}, nil
}

// AutoRefusal is why scenario's memory target cannot be judged by solo
// twins (--effects auto), or "" when it can.
func AutoRefusal(scenario string) string {
	switch scenario {
	case scenarios.MemorySet, scenarios.CheckThenWrite, scenarios.ConditionalUpdate, scenarios.UniqueInsert,
		scenarios.LostUpdate, scenarios.WriteSkew:
		return ""
	case scenarios.JobQueue:
		return "job-queue cannot be judged by --effects auto: its failure is one job run by several workers, which a change of the store shows only as fewer jobs taken than the same workers took alone (LOST), not as the double run it is; leave --effects out, and its own count (runs against jobs taken) judges it"
	case scenarios.TTLLease:
		return "ttl-lease cannot be judged by --effects auto: its failure is two holders of one lease at once, which no change of the store shows; leave --effects out, and its own count judges it"
	}
	return fmt.Sprintf("%s cannot be judged by --effects auto yet: its embedded target keeps what it did in the scenario's own counters, which no snapshot reads (memory-set, check-then-write, conditional-update, unique-insert, lost-update and write-skew measure their store); leave --effects out, and the scenario's own count judges it", scenario)
}

func (t *target) Notes() []string {
	var notes []string
	if t.p.Latency == 0 {
		notes = append(notes, "memory: no simulated round trip (--latency 0): windows are as narrow as in-process code")
	} else {
		jitter := ""
		if t.p.Seed != 0 {
			jitter = fmt.Sprintf(" ±%.0f%%", jitterShare*100)
		}
		notes = append(notes, fmt.Sprintf("memory: every store operation takes a simulated round trip of %s%s (--latency)", t.p.Latency, jitter))
	}
	// The embedded store has one behaviour; on a server the outcome may
	// depend on the isolation level, and the report must not imply one.
	if n := scenarios.IsolationNote(t.name, t.p.Variant); n != "" {
		notes = append(notes, n)
	}
	return notes
}

func (t *target) Open(_ context.Context, replica, _ int) (runner.App, error) {
	return &app{t: t, replica: replica}, nil
}

// app is one replica: its memory is the processing set of memory-set.
type app struct {
	t       *target
	replica int
	memory  scenarios.ReplicaMemory
}

func (a *app) Session(context.Context, int) (runner.Session, error) { return session{a}, nil }
func (a *app) Close() error                                         { return nil }

type session struct{ a *app }

func (s session) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	return s.a.t.attempt(ctx, s.a.t, s.a, subj, w)
}
func (session) Close() error { return nil }

var errAlready = fmt.Errorf("already done")

func sleep(ctx context.Context, d time.Duration) error { return Wait(ctx, d) }

// memorySet: check and mark in the replica's own memory, correctly locked
// inside the replica; then the guarded action writes to the shared store.
func memorySet(ctx context.Context, t *target, a *app, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	if !a.memory.Claim(s.Key) {
		return runner.Refused(errAlready)
	}
	if err := sleep(ctx, t.p.Gap); err != nil {
		return runner.Failed(err)
	}
	w.Step(ctx, "act")
	if err := t.store.Insert(ctx, s.Key); err != nil {
		return runner.Failed(err)
	}
	return runner.Done()
}

// checkThenWrite: read from the store, and if free, write — two round trips.
func checkThenWrite(ctx context.Context, t *target, _ *app, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	n, err := t.store.Count(ctx, s.Key)
	if err != nil {
		return runner.Failed(err)
	}
	if n > 0 {
		return runner.Refused(errAlready)
	}
	if err := sleep(ctx, t.p.Gap); err != nil {
		return runner.Failed(err)
	}
	w.Step(ctx, "act")
	if err := t.store.Insert(ctx, s.Key); err != nil {
		return runner.Failed(err)
	}
	return runner.Done()
}

// conditionalUpdate: one compare-and-set, decided by the store.
func conditionalUpdate(ctx context.Context, t *target, _ *app, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	ok, err := t.store.CompareAndSet(ctx, s.Key, "issued", "redeemed")
	if err != nil {
		return runner.Failed(err)
	}
	if !ok {
		return runner.Refused(fmt.Errorf("no row in status issued"))
	}
	return runner.Done()
}

// uniqueInsert: insert; the unique constraint refuses the rest.
func uniqueInsert(ctx context.Context, t *target, _ *app, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	err := t.store.InsertUnique(ctx, s.Key)
	switch {
	case err == ErrDuplicate:
		return runner.Refused(err)
	case err != nil:
		return runner.Failed(err)
	}
	return runner.Done()
}

// ttlLease: take the lease if free or expired; the holder then "dies"
// without releasing, so the lease frees itself only after the TTL.
func ttlLease(ctx context.Context, t *target, _ *app, s runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	ok, _, err := t.store.Acquire(ctx, s.Key, "w"+strconv.Itoa(w.ID), t.p.TTL)
	if err != nil {
		return runner.Failed(err)
	}
	if !ok {
		return runner.Refused(fmt.Errorf("lease held by another worker"))
	}
	return runner.Done()
}

// Checks verifies the lease's liveness: a holder that died without releasing
// blocks others until the TTL, and not after it.
func (t *target) Checks(ctx context.Context) []runner.Check {
	if t.name != scenarios.TTLLease {
		return nil
	}
	return []runner.Check{leaseLiveness(ctx, t.store, t.p.Prefix()+"liveness", t.p.TTL)}
}

func leaseLiveness(ctx context.Context, st *Store, key string, ttl time.Duration) runner.Check {
	c := runner.Check{Name: "lease liveness"}
	start := time.Now()
	if ok, _, err := st.Acquire(ctx, key, "dies", ttl); err != nil || !ok {
		c.Detail = fmt.Sprintf("first holder could not take a free lease (granted=%v, err=%v)", ok, err)
		return c
	}
	_ = sleep(ctx, ttl/2)
	if ok, _, err := st.Acquire(ctx, key, "early", ttl); err != nil || ok {
		at := time.Since(start)
		if err == nil && at >= ttl {
			// The try returned after the TTL (a loaded machine): a grant then
			// is correct, and says nothing about the lease before it. The
			// grant happened after start, so a try that returned earlier
			// was certainly within the TTL: that one is judged.
			c.Inconclusive = true
			c.Detail = fmt.Sprintf("the try meant for half the %s TTL returned only at %s: this machine could not test the lease before its TTL", ttl, at.Round(time.Millisecond))
			return c
		}
		c.Detail = fmt.Sprintf("at %s, before the %s TTL, the lease was granted=%v (err=%v): expected refused",
			at.Round(time.Millisecond), ttl, ok, err)
		return c
	}
	c = scenarios.AwaitExpiry(ctx, start, ttl/2, ttl, "", func() (bool, error) {
		ok, _, err := st.Acquire(ctx, key, "next", ttl)
		return ok, err
	})
	st.Drop(key)
	return c
}
