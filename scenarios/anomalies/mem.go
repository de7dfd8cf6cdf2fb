package anomalies

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
)

// The engine contract, and the optional parts the embedded target promises.
var (
	_ runner.Target     = (*memTarget)(nil)
	_ runner.Allowancer = (*memTarget)(nil)
	_ runner.Requirer   = (*memTarget)(nil)
	_ runner.Noter      = (*memTarget)(nil)
)

// memDB is the embedded store of the anomaly scenarios: rows under keys,
// each operation one simulated round trip applied atomically, and named
// locks a transaction can hold across round trips (what FOR UPDATE and a
// conflict row do on a server). It has no snapshots and no isolation
// levels: every read sees the last write.
type memDB struct {
	latency time.Duration

	mu       sync.Mutex
	accounts map[int64]*account
	onCall   map[int64][]bool // per shift, per doctor
	jobs     map[int64][]job  // per burst
	locks    map[string]chan struct{}
}

type account struct{ balance, version, writes int }

type job struct {
	taken  bool
	runs   int
	locked bool
}

func newMemDB(latency time.Duration) *memDB {
	return &memDB{latency: latency, accounts: map[int64]*account{}, onCall: map[int64][]bool{},
		jobs: map[int64][]job{}, locks: map[string]chan struct{}{}}
}

// trip runs op atomically between the two halves of a round trip.
func (m *memDB) trip(ctx context.Context, op func()) error {
	if err := memstore.Wait(ctx, m.latency/2); err != nil {
		return err
	}
	m.mu.Lock()
	op()
	m.mu.Unlock()
	return memstore.Wait(ctx, m.latency-m.latency/2)
}

// lock takes the named lock, waiting for its holder, in one round trip.
func (m *memDB) lock(ctx context.Context, name string) error {
	m.mu.Lock()
	l, ok := m.locks[name]
	if !ok {
		l = make(chan struct{}, 1)
		m.locks[name] = l
	}
	m.mu.Unlock()
	if err := memstore.Wait(ctx, m.latency/2); err != nil {
		return err
	}
	select {
	case l <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	return memstore.Wait(ctx, m.latency-m.latency/2)
}

func (m *memDB) unlock(name string) {
	m.mu.Lock()
	l := m.locks[name]
	m.mu.Unlock()
	<-l
}

// memAttempt is one variant's attempt on the embedded store.
type memAttempt func(ctx context.Context, t *memTarget, subj runner.Subject, w *runner.Worker) error

type memPattern struct {
	reset    func(t *memTarget, s runner.Subject)
	attempts map[string]memAttempt
	tally    func(t *memTarget, s runner.Subject) tally
}

func memPatternOf(scenario string) *memPattern {
	switch scenario {
	case LostUpdate:
		return lostUpdateMem
	case WriteSkew:
		return writeSkewMem
	case JobQueue:
		return jobQueueMem
	}
	panic("anomalies: no embedded pattern for " + scenario)
}

func memFactory(scenario string) scenarios.Factory {
	return func(_ context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, scenarios.BadParam(err)
		}
		if err := scenarios.NoIsolation(scenario, p); err != nil {
			return nil, err
		}
		variant, err := pickVariant("memory", scenario, p.Variant)
		if err != nil {
			return nil, err
		}
		pat := memPatternOf(scenario)
		return &memTarget{name: scenario, variant: variant, pat: pat, attempt: pat.attempts[variant], p: p,
			db: newMemDB(p.Latency), tallies: map[int]tally{}}, nil
	}
}

type memTarget struct {
	name, variant string
	pat           *memPattern
	attempt       memAttempt
	p             scenarios.Params
	db            *memDB

	mu      sync.Mutex
	tallies map[int]tally
}

func (t *memTarget) Prepare(context.Context) error { return nil }

func (t *memTarget) Cleanup(context.Context) error {
	t.db = newMemDB(t.p.Latency)
	return nil
}

func (t *memTarget) Reset(_ context.Context, burst int) (runner.Subject, error) {
	s := runner.Subject{Burst: burst, Key: t.p.Prefix() + strconv.Itoa(burst), Data: int64(burst) + 1}
	t.db.mu.Lock()
	t.pat.reset(t, s)
	t.db.mu.Unlock()
	return s, nil
}

func (t *memTarget) Effects(_ context.Context, s runner.Subject) (int, error) {
	t.db.mu.Lock()
	tl := t.pat.tally(t, s)
	t.db.mu.Unlock()
	t.mu.Lock()
	t.tallies[s.Burst] = tl
	t.mu.Unlock()
	return tl.effects, nil
}

func (t *memTarget) Allowed(s runner.Subject, _ [runner.NumClasses]int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tallies[s.Burst].allowed
}

func (t *memTarget) Required(s runner.Subject, _ [runner.NumClasses]int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.tallies[s.Burst].required
	delete(t.tallies, s.Burst)
	return r
}

func (t *memTarget) Notes() []string {
	notes := []string{fmt.Sprintf("memory: every store operation takes a simulated round trip of %s (--latency)", t.p.Latency)}
	if n := scenarios.IsolationNote(t.name, t.variant); n != "" {
		notes = append(notes, n)
	}
	return notes
}

var _ runner.Snapshotter = (*memTarget)(nil)

// Snapshot measures the whole embedded database for --effects auto, as
// racetest measures a server's tables: per table its rows and the sum of
// each numeric column (a flag counts 1 when set). Each run's target has a
// database of its own: nothing else writes to it.
func (t *memTarget) Snapshot(context.Context) (runner.Snapshot, error) {
	m := t.db
	m.mu.Lock()
	defer m.mu.Unlock()
	var accounts, balance, version, doctors, onCall, jobs, taken, runs int64
	for _, a := range m.accounts {
		accounts++
		balance += int64(a.balance)
		version += int64(a.version)
	}
	for _, shift := range m.onCall {
		for _, on := range shift {
			doctors++
			if on {
				onCall++
			}
		}
	}
	for _, queue := range m.jobs {
		for _, j := range queue {
			jobs++
			if j.taken {
				taken++
			}
			runs += int64(j.runs)
		}
	}
	n := func(v int64) *big.Rat { return big.NewRat(v, 1) }
	return runner.Snapshot{
		"accounts" + runner.RowsSuffix: n(accounts), "accounts.balance": n(balance), "accounts.version": n(version),
		"doctors" + runner.RowsSuffix: n(doctors), "doctors.on_call": n(onCall),
		"jobs" + runner.RowsSuffix: n(jobs), "jobs.taken": n(taken), "jobs.runs": n(runs),
	}, nil
}

func (t *memTarget) Open(context.Context, int, int) (runner.App, error) { return memApp{t}, nil }

type memApp struct{ t *memTarget }

func (a memApp) Session(context.Context, int) (runner.Session, error) { return memSession(a), nil }
func (memApp) Close() error                                           { return nil }

type memSession struct{ t *memTarget }

func (s memSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	return outcome(s.t.attempt(ctx, s.t, subj, w))
}
func (memSession) Close() error { return nil }

func (t *memTarget) gap(ctx context.Context) error { return memstore.Wait(ctx, t.p.Gap) }

// ---- lost-update ----

var lostUpdateMem = &memPattern{
	reset: func(t *memTarget, s runner.Subject) { t.db.accounts[s.Data.(int64)] = &account{} },
	attempts: map[string]memAttempt{
		Naive: memReadModifyWrite(false),
		// The row lock a SELECT … FOR UPDATE takes, held until the write.
		ForUpdate: memReadModifyWrite(true),
		Atomic: func(ctx context.Context, t *memTarget, s runner.Subject, w *runner.Worker) error {
			w.Step(ctx, "act")
			return t.db.trip(ctx, func() {
				a := t.db.accounts[s.Data.(int64)]
				a.balance++
				a.writes++
			})
		},
		Version: func(ctx context.Context, t *memTarget, s runner.Subject, w *runner.Worker) error {
			tries := maxTries(t.p)
			for try := 1; ; try++ {
				w.Step(ctx, "check")
				var balance, version int
				if err := t.db.trip(ctx, func() { a := t.db.accounts[s.Data.(int64)]; balance, version = a.balance, a.version }); err != nil {
					return err
				}
				if err := t.gap(ctx); err != nil {
					return err
				}
				w.Step(ctx, "act")
				ok := false
				err := t.db.trip(ctx, func() {
					if a := t.db.accounts[s.Data.(int64)]; a.version == version {
						a.balance, a.version, ok = balance+1, version+1, true
						a.writes++
					}
				})
				switch {
				case err != nil:
					return err
				case ok:
					return nil
				case try == tries:
					return errDeclined{fmt.Sprintf("the version moved on each of %d tries", tries)}
				}
			}
		},
	},
	tally: func(t *memTarget, s runner.Subject) tally {
		a := t.db.accounts[s.Data.(int64)]
		return tally{effects: a.balance, allowed: a.writes, required: a.writes}
	},
}

func memReadModifyWrite(lock bool) memAttempt {
	return func(ctx context.Context, t *memTarget, s runner.Subject, w *runner.Worker) error {
		id := s.Data.(int64)
		if lock {
			if err := t.db.lock(ctx, s.Key); err != nil {
				return err
			}
			defer t.db.unlock(s.Key)
		}
		w.Step(ctx, "check")
		var balance int
		if err := t.db.trip(ctx, func() { balance = t.db.accounts[id].balance }); err != nil {
			return err
		}
		if err := t.gap(ctx); err != nil {
			return err
		}
		w.Step(ctx, "act")
		return t.db.trip(ctx, func() {
			a := t.db.accounts[id]
			a.balance = balance + 1
			a.writes++
		})
	}
}

// ---- write-skew ----

var writeSkewMem = &memPattern{
	reset: func(t *memTarget, s runner.Subject) {
		doctors := make([]bool, max(t.p.Attempts, 1))
		for i := range doctors {
			doctors[i] = true
		}
		t.db.onCall[s.Data.(int64)] = doctors
	},
	attempts: map[string]memAttempt{
		Naive:     memGoOffCall(false),
		ForUpdate: memGoOffCall(true),
		// On the embedded store the conflict row is a lock on the shift,
		// as FOR UPDATE is: there is no snapshot for it to invalidate.
		Materialized: memGoOffCall(true),
	},
	tally: func(t *memTarget, s runner.Subject) tally {
		off := 0
		for _, on := range t.db.onCall[s.Data.(int64)] {
			if !on {
				off++
			}
		}
		allowed := max(t.p.Attempts, 1) - 1
		return tally{effects: off, allowed: allowed, required: min(1, allowed)}
	},
}

func memGoOffCall(lock bool) memAttempt {
	return func(ctx context.Context, t *memTarget, s runner.Subject, w *runner.Worker) error {
		shift := s.Data.(int64)
		if lock {
			w.Step(ctx, "lock")
			if err := t.db.lock(ctx, s.Key); err != nil {
				return err
			}
			defer t.db.unlock(s.Key)
		}
		w.Step(ctx, "check")
		n := 0
		err := t.db.trip(ctx, func() {
			for _, on := range t.db.onCall[shift] {
				if on {
					n++
				}
			}
		})
		if err != nil {
			return err
		}
		if n < 2 {
			return errStays
		}
		if err := t.gap(ctx); err != nil {
			return err
		}
		w.Step(ctx, "act")
		return t.db.trip(ctx, func() {
			if d := t.db.onCall[shift]; w.ID < len(d) {
				d[w.ID] = false
			}
		})
	}
}

// ---- job-queue ----

var jobQueueMem = &memPattern{
	reset: func(t *memTarget, s runner.Subject) { t.db.jobs[s.Data.(int64)] = make([]job, max(t.p.Attempts, 1)) },
	attempts: map[string]memAttempt{
		Naive:       memTakeJob(false),
		SkipLocked:  memTakeJob(true),
		Conditional: memClaimJob,
	},
	tally: func(t *memTarget, s runner.Subject) tally {
		runs, taken := 0, 0
		for _, j := range t.db.jobs[s.Data.(int64)] {
			runs += j.runs
			if j.runs > 0 {
				taken++
			}
		}
		return tally{effects: runs, allowed: taken, required: max(t.p.Attempts, 1)}
	},
}

// firstPending is the first pending job not locked by another worker when
// skipLocked, which it then locks; -1 when there is none.
func firstPending(jobs []job, skipLocked bool) int {
	for i := range jobs {
		if !jobs[i].taken && !(skipLocked && jobs[i].locked) {
			if skipLocked {
				jobs[i].locked = true
			}
			return i
		}
	}
	return -1
}

func memTakeJob(skipLocked bool) memAttempt {
	return func(ctx context.Context, t *memTarget, s runner.Subject, w *runner.Worker) error {
		q := s.Data.(int64)
		w.Step(ctx, "check")
		i := -1
		if err := t.db.trip(ctx, func() { i = firstPending(t.db.jobs[q], skipLocked) }); err != nil {
			return err
		}
		if i < 0 {
			return errQueueEmpty
		}
		if err := t.gap(ctx); err != nil {
			return err
		}
		w.Step(ctx, "act")
		return t.db.trip(ctx, func() {
			j := &t.db.jobs[q][i]
			j.taken, j.locked = true, false
			j.runs++
		})
	}
}

func memClaimJob(ctx context.Context, t *memTarget, s runner.Subject, w *runner.Worker) error {
	q := s.Data.(int64)
	tries := maxTries(t.p)
	for try := 1; ; try++ {
		w.Step(ctx, "check")
		i := -1
		if err := t.db.trip(ctx, func() { i = firstPending(t.db.jobs[q], false) }); err != nil {
			return err
		}
		if i < 0 {
			return errQueueEmpty
		}
		if err := t.gap(ctx); err != nil {
			return err
		}
		w.Step(ctx, "act")
		ok := false
		err := t.db.trip(ctx, func() {
			if j := &t.db.jobs[q][i]; !j.taken {
				j.taken, ok = true, true
				j.runs++
			}
		})
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case try == tries:
			return errDeclined{fmt.Sprintf("another worker claimed the job first on each of %d tries", tries)}
		}
	}
}
