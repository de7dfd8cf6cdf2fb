package runner

import (
	"context"
	"time"
)

// Target is one scenario on one backend, as the runner drives it. The
// scenarios package builds Targets; the runner never imports a driver.
//
// The lifecycle of a run is Prepare, then for each burst Reset (and
// Baseline, for a Baseliner), the attempts, Effects (and Broken, for an
// Invarianter), then Cleanup. Replicas are opened with Open and closed (and
// re-opened, for a "deploy") by the runner.
type Target interface {
	// Prepare creates what the run needs (namespaced tables, keys).
	Prepare(ctx context.Context) error
	// Open starts replica number i: one instance of the application, with
	// its own memory and its own connection pool.
	Open(ctx context.Context, replica int, workers int) (App, error)
	// Reset makes a fresh subject for burst number burst.
	Reset(ctx context.Context, burst int) (Subject, error)
	// Effects counts, in the store itself, how many times the guarded action
	// took effect on s. This is the ground truth of a burst.
	Effects(ctx context.Context, s Subject) (int, error)
	// Cleanup drops exactly what Prepare made. It is called only after a
	// successful Prepare: a Prepare that fails half-way drops what it made
	// itself, since only it knows which objects are its own (a name that
	// already existed must never be dropped).
	Cleanup(ctx context.Context) error
}

// App is one replica of the application under test.
type App interface {
	// Session returns worker w's own session: a connection dialled and
	// pinged before the burst, so that connection setup never serialises
	// the attempts.
	Session(ctx context.Context, worker int) (Session, error)
	// Close stops the replica; its memory is gone.
	Close() error
}

// Session is one worker's handle on its replica.
type Session interface {
	// Attempt tries the guarded action once on s. It records the steps of
	// the pattern with w.Mark ("check", "act") so a timeline can show them.
	Attempt(ctx context.Context, s Subject, w *Worker) Outcome
	// Close releases the session's connection.
	Close() error
}

// Subject is what one burst competes for: a token, a key, a row.
type Subject struct {
	Burst int
	// Key names the subject in the store, unique within the run.
	Key string
	// Data carries whatever else the scenario needs.
	Data any
}

// Optional interfaces a Target may implement.
type (
	// Allowancer lets a target say how many effects were correct for one
	// burst when that depends on what happened (a fail-open policy, a class
	// that bypasses dedupe). Without it the run's Allowed applies.
	Allowancer interface {
		Allowed(s Subject, outcomes [NumClasses]int) int
	}
	// Requirer lets a target say how many effects one burst required when
	// that depends on what happened: every increment that executed must
	// have landed, every queued job must have been taken. Without it the
	// run's Required applies, capped by the burst's allowance.
	Requirer interface {
		Required(s Subject, outcomes [NumClasses]int) int
	}
	// Baseliner is a target whose effects check is a team's own query, which
	// may count a shared table (SELECT count(*) FROM redemptions) or a value
	// that was not 0 before the burst. Baseline counts, as Effects does,
	// right after Reset made the subject; the burst's effects are then the
	// change between the two counts (Result.Baselined), so that a check
	// which never moves while attempts report success can be told apart
	// from a guard that held (report's "the check never changed").
	// Baselined says whether it applies: a target that counts by itself
	// where no check was given (HTTP's successful responses) says false.
	Baseliner interface {
		Baselined() bool
		Baseline(ctx context.Context, s Subject) (int, error)
	}
	// Invarianter is a target that checks, after every burst, properties
	// that must always hold ("no account below 0"). Invariants names them,
	// in order (nil: none); Broken counts how many times each is broken
	// now (0: it holds), in the same order. The runner calls it after Reset
	// and after the burst: a burst that added violations broke the
	// invariant, which makes it a violation whatever its effects.
	// An invariant judges only the bursts before which it held (see
	// Burst.Unjudged): one already broken cannot be broken again, and a
	// boolean that reads false stays false whatever the burst does.
	Invarianter interface {
		Invariants() []string
		Broken(ctx context.Context, s Subject) ([]int, error)
	}
	// InvariantScoper is an Invarianter whose invariants may read only
	// what the burst's own subject holds (a script's that uses
	// {{.Token}}): ScopedInvariants says which, in the order of
	// Invariants. A fresh subject starts clean, so a scoped invariant
	// judges every burst by the violations it adds, even one it read
	// broken before. Without it, no invariant is scoped.
	InvariantScoper interface {
		ScopedInvariants() []bool
	}
	// Uncounted is a target without an effects check: it is judged by its
	// invariants and by its attempts' outcomes alone. When Uncounted
	// returns true, Baseline and Effects are never called, and every
	// burst's effects, allowance and floor are 0.
	Uncounted interface {
		Uncounted() bool
	}
	// WireSpreader is a target that sends its attempts' requests itself,
	// past the gate: an HTTP target whose last bytes one loop writes after
	// the gate has opened. What the race sees is when those requests left,
	// not when the workers were released, so WireSpread is burst s's time
	// from the first to the last request leaving (false: none left), and
	// the runner records it as Burst.Spread in place of the gate's (in a
	// run of one wave a burst: across waves it would count the time
	// between them).
	WireSpreader interface {
		WireSpread(s Subject) (time.Duration, bool)
	}
	// ServerParalleler estimates how many of burst s's attempts the server
	// handled at once, from what the target saw of its answers (their
	// response times; 1 when its ServerProbe found the server serial); 0
	// when it cannot tell. The runner records it as
	// Burst.ServerParallelism after the burst's effects are counted.
	ServerParalleler interface {
		ServerParallelism(s Subject) float64
	}
	// LockWaiter watched the store while burst s was in flight, and
	// reports whether a session of it waited on a lock meanwhile (the
	// server's own lock tables or counters say so). Called once per
	// burst, after ServerParallelism; recorded as Burst.LockWaited.
	LockWaiter interface {
		LockWaited(s Subject) bool
	}
	// Holder had a database proxy hold burst s's statements (racetest
	// http --proxy), and returns its account, nil when it has none.
	// Called once per burst, after LockWaited; recorded as Burst.Hold.
	Holder interface {
		Hold(s Subject) *Hold
	}
	// ServerProber probed the server once, before the bursts, for whether
	// it serves two requests at once (see ServerProbe); the runner records
	// it as Result.ServerProbe at the end of the run. A target whose probe
	// found the server serial reports ServerParallelism 1 for every burst.
	ServerProber interface {
		ServerProbe() *ServerProbe
	}
	// Describer names the server a target measured ("MariaDB 10.11.19").
	Describer interface {
		Server() string
	}
	// Checker reports properties checked besides the effect count, such as a
	// lease's liveness. A failed check fails the run's expectation.
	Checker interface {
		Checks(ctx context.Context) []Check
	}
	// Diagnoser says in one line why no attempt took effect, when the
	// target can tell better than the outcome counts ("no request
	// succeeded: 404 ×800 — is the URL right?"). "" when it cannot.
	Diagnoser interface {
		Diagnose() string
	}
	// Noter adds lines the report should show (the simulated latency, the
	// table engine the server really used).
	Noter interface {
		Notes() []string
	}
	// Closer releases what a target holds for its whole life (its own
	// connection for setup and counting). Whoever built the target closes
	// it once, after Cleanup — or instead of it when Prepare never ran or
	// the tables belong to another process.
	Closer interface {
		Close() error
	}
)

// Check is one property a target verified besides counting effects.
type Check struct {
	Name string `json:"name"`
	// OK: the property held — or, for a Bug check, the bug showed.
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Bug marks a check that demonstrates a known bug of the variant under
	// test (a dedupe table that prunes by age): OK means the bug showed as
	// the story says, which reports read as "bug shown", never as "ok".
	Bug bool `json:"bug,omitempty"`
	// Inconclusive: the check could not judge (a loaded machine could not
	// try within a lease's TTL). It fails nothing; it makes a SAFE run
	// INCONCLUSIVE.
	Inconclusive bool `json:"inconclusive,omitempty"`
}

// Worker is one attempt's runner-side state. A Session marks the steps of
// its attempt on it.
type Worker struct {
	ID      int
	Replica int
	// Wave is the wave within the burst (0 unless the run has waves).
	Wave  int
	base  time.Time
	marks []Mark
	// onFirstMark, set in a wire release, arms the worker's connection when
	// its attempt begins its first step.
	onFirstMark func()
	sched       Scheduler
}

// Mark records that the attempt reached step name now.
func (w *Worker) Mark(name string) {
	if w.onFirstMark != nil {
		arm := w.onFirstMark
		w.onFirstMark = nil
		arm()
	}
	w.marks = append(w.marks, Mark{Name: name, At: time.Since(w.base)})
}

// Step marks that the attempt begins step name, after the run's Scheduler
// (if any) let it: a step boundary is where an interleaving can be chosen.
// Without a Scheduler it is Mark.
func (w *Worker) Step(ctx context.Context, name string) {
	if w.sched != nil {
		w.sched.Step(ctx, w.ID, name)
	}
	w.Mark(name)
}

// Scheduler decides when attempts cross their step boundaries. Step is
// called on the attempt's goroutine before the step's mark and may block, to
// hold one worker back while others go on: that is how an explorer of
// interleavings orders the steps of a burst ("both checks before either
// write"). Done tells it an attempt returned, so that it waits no more for
// that worker. Step must return when ctx ends.
type Scheduler interface {
	Step(ctx context.Context, worker int, step string)
	Done(worker int)
}

// Since returns how long ago the burst's gate opened.
func (w *Worker) Since() time.Duration { return time.Since(w.base) }

// NewWorker makes the runner-side state of attempt id on replica, whose
// steps s orders (nil: none). An engine other than Run — an explorer that
// runs one attempt per worker in chosen orders — drives attempts with it;
// the marks are timed from the call.
func NewWorker(id, replica int, s Scheduler) *Worker {
	return &Worker{ID: id, Replica: replica, base: time.Now(), sched: s}
}

// Marks are the steps the attempt reached so far, in order.
func (w *Worker) Marks() []Mark { return append([]Mark(nil), w.marks...) }
