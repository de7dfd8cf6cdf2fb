// Package runner is racetest's burst engine: it releases N attempts at one
// subject together, repeats that burst, and counts what really happened in
// the store. It is a library; the command line is one user of it.
//
//	res, err := runner.Run(ctx, target, runner.Attempts(16), runner.Bursts(200))
//	if err != nil { ... }
//	if res.Violations() > 0 { t.Errorf("%d of %d bursts ran the action twice", res.Violations(), len(res.Bursts)) }
//
// Progress leaves the runner only through the OnProgress callback.
package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ConfigError is a run shape that cannot be carried out (N < 1, ...).
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// Validate reports the first field that makes the config unusable.
func (c *Config) Validate() error {
	// One if per field rather than a switch: gremlins v0.6.0 never counts a
	// switch's case expressions as covered (scripts/mutation.sh).
	if c.Attempts < 1 {
		return &ConfigError{fmt.Sprintf("attempts must be at least 1 (got %d)", c.Attempts)}
	}
	if c.Bursts < 1 {
		return &ConfigError{fmt.Sprintf("bursts must be at least 1 (got %d)", c.Bursts)}
	}
	if c.Replicas < 1 {
		return &ConfigError{fmt.Sprintf("replicas must be at least 1 (got %d)", c.Replicas)}
	}
	if c.Waves < 1 {
		return &ConfigError{fmt.Sprintf("waves must be at least 1 (got %d)", c.Waves)}
	}
	if c.Allowed < 0 {
		return &ConfigError{fmt.Sprintf("allowed effects cannot be negative (got %d)", c.Allowed)}
	}
	if c.Required < 0 || c.Required > c.Allowed {
		return &ConfigError{fmt.Sprintf("required effects must be between 0 and the %d allowed (got %d)", c.Allowed, c.Required)}
	}
	if c.Retries < 0 {
		return &ConfigError{fmt.Sprintf("retries cannot be negative (got %d)", c.Retries)}
	}
	if c.Timeout < 0 {
		return &ConfigError{fmt.Sprintf("timeout cannot be negative (got %s)", c.Timeout)}
	}
	if c.SoloEvery < 0 {
		return &ConfigError{fmt.Sprintf("solo twins every K bursts needs K of at least 1, or 0 for none (got %d)", c.SoloEvery)}
	}
	return nil
}

// NewConfig applies opts over the defaults.
func NewConfig(opts ...Option) Config {
	c := Config{
		Attempts: DefaultAttempts,
		Bursts:   DefaultBursts,
		Replicas: DefaultReplicas,
		Waves:    DefaultWaves,
		Allowed:  DefaultAllowed,
		Required: DefaultRequired,
		Timeout:  DefaultTimeout,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// ErrHung is returned when attempts did not return long after their timeout:
// a session that ignores its context. The run stops rather than hang.
var ErrHung = errors.New("attempts did not return after their timeout")

// hangGrace is how long past the attempt timeout the engine waits for a
// session that ignores its context.
var hangGrace = 5 * time.Second

// maxErrorKinds caps the distinct error messages a Result keeps.
const maxErrorKinds = 20

// cleanupTimeout bounds Cleanup, which runs even after Ctrl-C.
const cleanupTimeout = 30 * time.Second

// Run fires cfg.Bursts bursts at t and returns what it found. On error the
// Result still holds the bursts that finished. A cancelled ctx stops the run
// between bursts (the burst in flight is discarded) and sets Interrupted.
func Run(ctx context.Context, t Target, opts ...Option) (res *Result, err error) {
	cfg := NewConfig(opts...)
	return RunConfig(ctx, t, cfg)
}

// RunConfig is Run with a ready Config.
func RunConfig(ctx context.Context, t Target, cfg Config) (res *Result, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	snap, _ := t.(Snapshotter)
	if cfg.SoloEvery > 0 && snap == nil {
		return nil, &ConfigError{"solo twins (--effects auto) need a target that can measure its store, and this one cannot: count the effects with a query instead"}
	}
	if cfg.SoloEvery == 0 {
		snap = nil
	}
	start := time.Now()
	res = &Result{
		Attempts: cfg.Attempts,
		Replicas: cfg.Replicas,
		Waves:    cfg.Waves,
		Deploy:   cfg.Deploy,
		Allowed:  cfg.Allowed,
		// Allowing nothing requires nothing.
		Required:   min(cfg.Required, cfg.Allowed),
		Timeout:    cfg.Timeout,
		Accounting: cfg.Accounting,
		Planned:    cfg.Bursts,
		Errors:     map[string]int{},
		Bursts:     make([]Burst, 0, min(cfg.Bursts, 1<<16)),
	}
	defer func() { res.Elapsed = time.Since(start) }()

	if err := t.Prepare(ctx); err != nil {
		return res, interrupted(ctx, res, fmt.Errorf("prepare: %w", err))
	}
	describe(t, res)
	if !cfg.Keep {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			res.CleanupErr = t.Cleanup(cctx)
		}()
	}

	e := &engine{cfg: cfg, t: t, res: res, rel: cfg.Release, snap: snap}
	e.observe()
	res.Release = cfg.ReleaseName()
	defer e.stopWorkers()
	defer func() { e.clock.close() }()
	defer e.addNotes()
	defer e.closeFleet()
	if err := e.openFleet(ctx); err != nil {
		return res, interrupted(ctx, res, err)
	}
	// goal is how many bursts the run fires: cfg.Bursts, and under TopUp
	// one more for each that did not test the guard, up to twice as many.
	goal := cfg.Bursts
	for b := 0; b < goal; b++ {
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
		burst, err := e.burst(ctx, b)
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
		if err != nil {
			return res, err
		}
		res.Bursts = append(res.Bursts, burst)
		if snap != nil {
			// Judged again after every burst: a column the solo twins
			// disagree on is set aside for the bursts before it too.
			res.Twins = judgeTwins(res.Bursts)
		}
		if cfg.TopUp && !burst.Tested() && goal < 2*cfg.Bursts {
			goal++
		}
		if cfg.Progress != nil {
			cfg.Progress(Progress{Done: b + 1, Total: goal, Violations: res.Violations()})
		}
		if cfg.StopOnViolation && burst.Violated() {
			res.Stopped = true
			break
		}
	}
	if c, ok := t.(Checker); ok && !res.Interrupted {
		res.Checks = c.Checks(ctx)
	}
	describe(t, res)
	if res.Interrupted {
		return res, context.Cause(ctx)
	}
	return res, nil
}

func describe(t Target, res *Result) {
	if d, ok := t.(Describer); ok {
		res.Server = d.Server()
	}
	if n, ok := t.(Noter); ok {
		res.Notes = n.Notes()
	}
	if d, ok := t.(Diagnoser); ok {
		res.Diagnosis = d.Diagnose()
	}
	if p, ok := t.(ServerProber); ok {
		res.ServerProbe = p.ServerProbe()
	}
}

// interrupted prefers the context's cause when a setup step failed because
// the run was cancelled.
func interrupted(ctx context.Context, res *Result, err error) error {
	if ctx.Err() != nil {
		res.Interrupted = true
		return context.Cause(ctx)
	}
	return err
}

type engine struct {
	cfg      Config
	t        Target
	base     Baseliner   // nil: effects are the target's count as is
	inv      Invarianter // nil: no invariants
	res      *Result
	rel      WireRelease // nil: the gate
	relErr   error       // why the wire release fell back to the gate
	clock    *waveClock  // the waves' timeout (nil until the first, or none)
	arm      []func()    // worker i's first mark arms its connection
	apps     []App
	sessions []Session
	workers  []*Worker
	outs     []Outcome
	retries  []int         // this wave's conflicts retried, per worker
	gaveUp   int           // attempts still in conflict at the end (after every retry, when retrying)
	cur      []WorkerTrace // this burst's trace, reused between bursts
	wire     WireCounts    // the last wave's, in a wire release
	maxSeen  int
	// snap measures the store for solo twins (nil: the effects are counted).
	snap      Snapshotter
	solos     int   // solo twins run so far
	lastSolo  Delta // the latest solo twin's change
	soloOrder []int // the order lastSolo ran the attempts in
	soloOf    int   // the burst lastSolo ran for
	// soloExecuted is how many of lastSolo's attempts executed.
	soloExecuted int
	// serials are the serial runs so far (solo twins and replays): a
	// burst whose change equals none of them is replayed (see replay).
	serials []Serial
	// exampleBroke: the Example broke an invariant.
	exampleBroke bool
	// scoped marks the invariants scoped to the burst's subject
	// (InvariantScoper); nil: none.
	scoped []bool
	// closeNote says that closing the fleet was abandoned, or is "".
	closeNote string
	// ws are the attempt goroutines, started on the first gate or wire
	// wave and stopped when the run ends (fleet.go).
	ws    *workers
	edges edges // inFlight's buffers
	hung  bool  // a wave's attempts did not return: ErrHung
}

// observe settles what the run observes after each burst: the effects
// check (as a change, for a Baseliner; not at all, for an Uncounted
// target) and the invariants.
func (e *engine) observe() {
	if u, ok := e.t.(Uncounted); ok && u.Uncounted() {
		e.res.Uncounted = true
	} else if b, ok := e.t.(Baseliner); ok && b.Baselined() {
		e.base, e.res.Baselined = b, true
	}
	if inv, ok := e.t.(Invarianter); ok && len(inv.Invariants()) > 0 {
		e.inv, e.res.Invariants = inv, inv.Invariants()
		if sc, ok := e.t.(InvariantScoper); ok {
			e.scoped = sc.ScopedInvariants()
		}
	}
}

func (e *engine) openFleet(ctx context.Context) error {
	n, r := e.cfg.Attempts, e.cfg.Replicas
	if len(e.workers) == 0 {
		// The workers, and room for 8 marks each, in two arrays, side by
		// side in the order a release goes through them: at N=10,000 the
		// spread was lower than with an allocation each in 6 pairs of 6
		// (docs/measurements.md, "Stop 39").
		const room = 8
		ws := make([]Worker, n)
		marks := make([]Mark, n*room)
		e.workers = make([]*Worker, n)
		for i := range e.workers {
			ws[i] = Worker{ID: i, Replica: i % r, marks: marks[i*room : i*room : (i+1)*room], sched: e.cfg.Scheduler}
			e.workers[i] = &ws[i]
		}
		e.outs = make([]Outcome, n)
		e.retries = make([]int, n)
	}
	e.apps = make([]App, r)
	e.sessions = make([]Session, n)
	for i := range r {
		app, err := e.t.Open(ctx, i, (n-i+r-1)/r)
		if err != nil {
			return fmt.Errorf("open replica %d: %w", i, err)
		}
		e.apps[i] = app
	}
	for i := range n {
		s, err := e.session(ctx, i)
		if err != nil {
			return fmt.Errorf("replica %d, worker %d: %w", i%r, i, err)
		}
		e.sessions[i] = s
	}
	if e.rel != nil {
		if err := e.rel.Ready(n); err != nil {
			e.relErr, e.rel = err, nil
			e.res.Release = GateRelease
		}
	}
	return nil
}

// session opens worker i's session; in a wire release, inside the worker's
// claim window, so that its connections are known to be its own.
func (e *engine) session(ctx context.Context, i int) (Session, error) {
	app := e.apps[i%e.cfg.Replicas]
	if e.rel == nil {
		return app.Session(ctx, i)
	}
	end := e.rel.Claim(i)
	defer end()
	return app.Session(e.rel.Context(ctx, i), i)
}

// addNotes appends the run's own notes to the target's: the config's, and
// how a wire release went.
func (e *engine) addNotes() {
	var extra []string
	extra = append(extra, e.cfg.Notes...)
	extra = append(extra, e.observedNotes()...)
	if e.cfg.Retries > 0 {
		extra = append(extra, retryNote(e.cfg.Retries, e.res.Retries(), e.gaveUp))
	}
	if e.closeNote != "" {
		extra = append(extra, e.closeNote)
	}
	if e.cfg.Release != nil {
		extra = append(extra, wireNote(e.cfg.Release.Name(), e.res.Bursts, e.relErr))
	}
	if n := len(e.res.Bursts) - e.res.Planned; e.cfg.TopUp && n > 0 {
		extra = append(extra, fmt.Sprintf("runner: %s fired beyond the %d planned, one for each that did not put the guard to the test (%d of %d did)",
			bursts(n), e.res.Planned, e.res.Tested(), len(e.res.Bursts)))
	}
	if len(extra) > 0 {
		e.res.Notes = append(append([]string(nil), e.res.Notes...), extra...)
	}
}

// observedNotes say how the bursts were judged: what the effects are (a
// change, and of what kind of count), accounting, and each invariant.
func (e *engine) observedNotes() []string {
	var notes []string
	r := e.res
	if r.Uncounted {
		notes = append(notes, "effects: none counted; the bursts are judged by their invariants and their attempts' outcomes")
	}
	if r.Baselined && len(r.Bursts) > 0 {
		lo, hi := r.Bursts[0].Before, r.Bursts[0].Before
		for _, b := range r.Bursts {
			lo, hi = min(lo, b.Before), max(hi, b.Before)
		}
		kind := "it read 0 before every burst: a count per subject"
		if hi > 0 {
			kind = fmt.Sprintf("it read %d to %d before the bursts: a shared count, of which each burst's effects are the change", lo, hi)
		}
		if hi > 0 && lo == hi {
			kind = fmt.Sprintf("it read %d before every burst: a shared count, of which each burst's effects are the change", hi)
		}
		notes = append(notes, "effects: the change of the effects check across each burst, read after the subject was made and after the burst ("+kind+")")
	}
	if r.Accounting {
		notes = append(notes, "accounting: each attempt that reported success must have landed exactly once (allowed and required per burst: its successes)")
	}
	for i, name := range r.Invariants {
		notes = append(notes, invariantNote(r, i, name))
	}
	return notes
}

// invariantNote says what invariant i judged: the bursts after which it
// held or broke, and those it could not judge because it was already
// broken before them (Burst.Unjudged).
func invariantNote(r *Result, i int, name string) string {
	all := len(r.Bursts)
	unjudged := r.UnjudgedBursts(i)
	n, most := r.BrokenBursts(i)
	if unjudged > 0 && unjudged == all {
		return fmt.Sprintf("invariant %s: already broken before every burst (%d), so it judged none: fix the data, or scope it to the burst's subject ({{.Token}} in a script)", name, all)
	}
	prefix := ""
	if unjudged > 0 {
		prefix = fmt.Sprintf("already broken before %d of %s, which it did not judge; ", unjudged, bursts(all))
	}
	judged := all - unjudged
	if n == 0 && unjudged == 0 {
		return fmt.Sprintf("invariant %s: held after every burst (%d)", name, all)
	}
	if n == 0 {
		return fmt.Sprintf("invariant %s: %sheld after every burst it judged (%d)", name, prefix, judged)
	}
	if unjudged == 0 {
		return fmt.Sprintf("invariant %s: broken after %d of %s (at most %d violations)", name, n, bursts(all), most)
	}
	return fmt.Sprintf("invariant %s: %sbroken after %d of the %d it judged (at most %d violations)", name, prefix, n, judged, most)
}

// bursts is "1 burst" or "n bursts".
func bursts(n int) string {
	if n == 1 {
		return "1 burst"
	}
	return fmt.Sprintf("%d bursts", n)
}

// closeTimeout bounds the closing of the fleet. A session whose attempt
// never returned (ErrHung: a driver call that ignores its context, on a
// server that stopped answering) holds its connection's lock, and closing
// it would wait as long: such sessions are abandoned to the process's exit.
var closeTimeout = 5 * time.Second

// closeFleet closes every session, then every app, each on its own, and
// waits for them at most closeTimeout.
func (e *engine) closeFleet() {
	sessions, apps := e.sessions, e.apps
	e.sessions, e.apps = nil, nil
	var open atomic.Int32
	closeAll := func(closers []func() error) bool {
		var wg sync.WaitGroup
		for _, c := range closers {
			wg.Add(1)
			open.Add(1)
			go func() {
				defer wg.Done()
				c()
				open.Add(-1)
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		t := time.NewTimer(closeTimeout)
		defer t.Stop()
		select {
		case <-done:
			return true
		case <-t.C:
			return false
		}
	}
	var cs []func() error
	for _, s := range sessions {
		if s != nil {
			cs = append(cs, s.Close)
		}
	}
	ok := closeAll(cs)
	var as []func() error
	for _, a := range apps {
		if a != nil {
			as = append(as, a.Close)
		}
	}
	if ok {
		ok = closeAll(as)
	} else {
		// An app's pool may wait for the stuck sessions' connections too.
		for _, c := range as {
			go c()
		}
	}
	if !ok {
		e.closeNote = fmt.Sprintf("%d connection(s) did not close within %s (the server stopped answering): racetest abandoned them", open.Load(), closeTimeout)
	}
}

func (e *engine) burst(ctx context.Context, index int) (Burst, error) {
	// Burst 0 always has one: every burst is compared with a twin.
	if e.snap != nil && index%e.cfg.SoloEvery == 0 {
		sr, err := e.soloTwin(ctx, index)
		if err != nil {
			return Burst{}, err
		}
		e.lastSolo, e.soloOrder, e.soloOf, e.soloExecuted = sr.Delta, sr.Order, index, sr.Executed
	}
	s, err := e.t.Reset(ctx, index)
	if err != nil {
		return Burst{}, fmt.Errorf("burst %d: reset: %w", index, err)
	}
	var before Snapshot
	if e.snap != nil {
		if before, err = e.snap.Snapshot(ctx); err != nil {
			return Burst{}, fmt.Errorf("burst %d: snapshot: %w", index, err)
		}
	}
	b := Burst{Index: index, Overlap: -1}
	if e.base != nil {
		if b.Before, err = e.base.Baseline(ctx, s); err != nil {
			return b, fmt.Errorf("burst %d: count effects before the burst: %w", index, err)
		}
	}
	var held []int // each invariant's violations before the burst
	if e.inv != nil {
		if held, err = e.broken(ctx, s); err != nil {
			return b, fmt.Errorf("burst %d: check invariants before the burst: %w", index, err)
		}
	}
	started := time.Now()
	e.cur = e.cur[:0]
	for wave := range e.cfg.Waves {
		if wave > 0 && e.cfg.Deploy {
			e.closeFleet()
			if err := e.openFleet(ctx); err != nil {
				return b, fmt.Errorf("burst %d: deploy before wave %d: %w", index, wave, err)
			}
		}
		spread, overlap, err := e.wave(ctx, s, wave)
		if err != nil {
			return b, fmt.Errorf("burst %d: %w", index, err)
		}
		b.Spread = max(b.Spread, spread)
		b.Wire.Held += e.wire.Held
		b.Wire.Late += e.wire.Late
		b.Wire.Silent += e.wire.Silent
		if b.Overlap < 0 || overlap < b.Overlap {
			b.Overlap = overlap
		}
		for i, o := range e.outs {
			b.Outcomes[o.Class]++
			b.Retries += e.retries[i]
			if o.Class == Conflict {
				e.gaveUp++ // read only when the run retries
			}
			if o.Err != nil && o.Class >= Conflict {
				e.countError(o.Err.Error())
			}
		}
	}
	b.Duration = time.Since(started)
	// One wave's: across waves, the first to the last request leaving
	// would count the time between them.
	if w, ok := e.t.(WireSpreader); ok && e.cfg.Waves == 1 {
		if d, ok := w.WireSpread(s); ok {
			b.Spread = d
		}
	}
	if ctx.Err() != nil {
		return b, ctx.Err()
	}
	if e.snap != nil {
		// A twin run is judged by its snapshots (twinBurst, which also
		// picks the example burst), not by the effects check.
		if b, err = e.twinBurst(ctx, b, s, before); err != nil {
			return b, err
		}
	} else {
		if err := e.count(ctx, s, &b); err != nil {
			return b, fmt.Errorf("burst %d: %w", index, err)
		}
		e.allow(s, &b)
	}
	if e.inv != nil {
		if b.Broken, err = e.broken(ctx, s); err != nil {
			return b, fmt.Errorf("burst %d: check invariants: %w", index, err)
		}
		e.judge(&b, held)
	}
	// The timeline shows the burst with the most effects (in a twin run,
	// the one that differs most from its twin), or the first to break an
	// invariant.
	broke := b.BrokeInvariant() && !e.exampleBroke
	if broke || e.snap == nil && (e.res.Example == nil || b.Effects > e.maxSeen) {
		if e.snap == nil {
			e.maxSeen = max(e.maxSeen, b.Effects)
		}
		e.exampleBroke = e.exampleBroke || broke
		e.res.Example = e.snapshot(b)
	}
	return b, nil
}

// judge settles which invariants judged the burst, from each one's
// violations before it (held) and after it (b.Broken, made the change).
// A burst breaks an invariant when it adds violations: one that an
// earlier burst (or the data) broke stays broken, and is that burst's,
// not this one's. An invariant already broken before the burst judges it
// only if it is scoped to the burst's subject, or if the burst added
// violations to it: a boolean that reads false stays false (one
// violation) whatever the burst does, and a count that did not grow
// cannot show that the burst kept it. A count that grew is a violation
// seen, whatever came before.
func (e *engine) judge(b *Burst, held []int) {
	b.Unjudged = make([]bool, len(b.Broken))
	judged := false
	for i := range b.Broken {
		b.Broken[i] = max(0, b.Broken[i]-held[i])
		scoped := i < len(e.scoped) && e.scoped[i]
		if held[i] > 0 && !scoped && b.Broken[i] == 0 {
			b.Unjudged[i] = true
		} else {
			judged = true
		}
	}
	if !slices.Contains(b.Unjudged, true) {
		b.Unjudged = nil
	}
	b.Unobserved = e.res.Uncounted && !judged
}

// broken counts each invariant's violations now.
func (e *engine) broken(ctx context.Context, s Subject) ([]int, error) {
	n, err := e.inv.Broken(ctx, s)
	if err == nil && len(n) != len(e.res.Invariants) {
		err = fmt.Errorf("%d counts for %d invariants", len(n), len(e.res.Invariants))
	}
	return n, err
}

// count sets the burst's effects: the target's count, or its change since
// Baseline. An Uncounted target counts nothing.
func (e *engine) count(ctx context.Context, s Subject, b *Burst) error {
	if e.res.Uncounted {
		return nil
	}
	after, err := e.t.Effects(ctx, s)
	if err != nil {
		return fmt.Errorf("count effects: %w", err)
	}
	b.Effects = after - b.Before
	if b.Effects < 0 {
		return &ConfigError{fmt.Sprintf("the effects check fell from %d to %d across the burst: it must count what the attempts did, a number that only grows (rows written, a counter); that a balance or a stock never goes below 0 is an invariant",
			b.Before, after)}
	}
	return nil
}

// allow sets the burst's allowance and floor: none for an Uncounted
// target, the successes under Accounting, else the run's (or the
// target's, for an Allowancer or a Requirer).
func (e *engine) allow(s Subject, b *Burst) {
	// Whatever judges the burst, a server that served it one request at a
	// time tested nothing: an accounting or invariant-only run too.
	e.serverFigures(s, b)
	if e.res.Uncounted {
		return
	}
	if e.cfg.Accounting {
		b.Allowed, b.Required = b.Outcomes[Executed], b.Outcomes[Executed]
		return
	}
	b.Allowed = e.cfg.Allowed
	if a, ok := e.t.(Allowancer); ok {
		b.Allowed = a.Allowed(s, b.Outcomes)
	}
	// A policy that allows nothing in a burst also requires nothing.
	b.Required = min(e.cfg.Required, b.Allowed)
	if r, ok := e.t.(Requirer); ok {
		b.Required = r.Required(s, b.Outcomes)
	}
}

// serverFigures records what the target saw of the server during burst s:
// how many attempts it handled at once, whether one waited on a lock, and
// what a database proxy held.
func (e *engine) serverFigures(s Subject, b *Burst) {
	if p, ok := e.t.(ServerParalleler); ok {
		b.ServerParallelism = p.ServerParallelism(s)
	}
	if w, ok := e.t.(LockWaiter); ok {
		b.LockWaited = w.LockWaited(s)
	}
	if h, ok := e.t.(Holder); ok {
		b.Hold = h.Hold(s)
	}
}

// attempt runs worker i's attempt at s, and again while the store answers
// with a conflict and retries are left, as an application that retries
// deadlocks and serialization failures does. Each retry is marked on the
// worker, so a timeline shows it, and counted.
func (e *engine) attempt(ctx context.Context, i int, sess Session, s Subject, w *Worker) Outcome {
	e.retries[i] = 0
	o := sess.Attempt(ctx, s, w)
	for o.Class == Conflict && e.retries[i] < e.cfg.Retries && ctx.Err() == nil {
		e.retries[i]++
		if backoff(ctx, e.retries[i]) != nil {
			break
		}
		w.Mark("retry")
		o = sess.Attempt(ctx, s, w)
	}
	return o
}

// retryBackoff caps the pause before a retry. Retrying at once, every loser
// of a serialization failure meets the others again; a short random pause
// that doubles with each retry spreads them out, as retry loops in
// applications do.
const retryBackoff = 32 * time.Millisecond

// backoffLimit is min(2^n × 250µs, retryBackoff) for retry number n.
func backoffLimit(n int) time.Duration {
	return min(time.Duration(1)<<min(n, 10)*250*time.Microsecond, retryBackoff)
}

// backoff pauses before retry number n (from 1): a random time below
// backoffLimit(n).
func backoff(ctx context.Context, n int) error {
	t := time.NewTimer(rand.N(backoffLimit(n)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// countError counts msg among the run's errors; past maxErrorKinds
// distinct messages, only those already seen are counted.
func (e *engine) countError(msg string) {
	if _, seen := e.res.Errors[msg]; seen || len(e.res.Errors) < maxErrorKinds {
		e.res.Errors[msg]++
	}
}

// wave releases every worker at s together and waits for all of them.
func (e *engine) wave(ctx context.Context, s Subject, wave int) (spread time.Duration, overlap int, err error) {
	if e.rel != nil {
		return e.wireWave(ctx, s, wave)
	}
	ws := e.startWorkers()
	// Everything that can be done before the gate is: after it, a worker
	// should do nothing but its attempt.
	for _, w := range e.workers {
		w.Wave = wave
		w.marks = w.marks[:0]
	}
	done := newWave(len(e.workers))
	// One timeout for the wave, not a context per attempt: every attempt
	// starts at the gate, so they share one deadline, and N timers (each
	// registered with ctx, and removed under its lock by N cancels) were
	// half of a worker's cost at N=10,000.
	actx, wc := e.waveContext(ctx)
	defer wc.release()
	var base time.Time
	// The sessions as they are now: a worker whose attempt hung must not
	// read e.sessions after the run has closed them (closeFleet).
	sessions := e.sessions
	n := int64(len(e.workers))
	run := func(i int) {
		w := e.workers[i]
		w.base = base
		w.Mark("released")
		// The last worker released arms the attempt timeout and the hang
		// watch: a timer in a P's heap costs a clock read at each goroutine
		// switch on it, which the release should not pay (see waveCtx).
		if done.released.Add(1) == n {
			wc.arm()
			e.watch(done)
		}
		o := e.attempt(actx, i, sessions[i], s, w)
		if o.Class == Error && errors.Is(context.Cause(actx), ErrTimeout) {
			o = Outcome{Class: Unknown, Err: o.Err}
		}
		if w.sched != nil {
			w.sched.Done(i)
		}
		w.Mark("done")
		e.outs[i] = o
		done.finish()
	}
	base = time.Now()
	ws.release(run)
	if err := e.await(done); err != nil {
		return 0, 0, err
	}
	first, last := time.Duration(1<<62), time.Duration(0)
	for _, w := range e.workers {
		r := w.marks[0].At
		first, last = min(first, r), max(last, r)
	}
	overlap = inFlight(e.workers, &e.edges)
	e.trace(wave)
	return last - first, overlap, nil
}

// startWorkers starts the run's workers on its first wave.
func (e *engine) startWorkers() *workers {
	if e.ws == nil {
		e.ws = startWorkers(len(e.workers))
	}
	return e.ws
}

// stopWorkers ends the run's workers, and waits for them unless a wave hung.
func (e *engine) stopWorkers() {
	if e.ws != nil {
		e.ws.stop(!e.hung)
		e.ws = nil
	}
}

// waveContext is the attempts' context for one wave: ctx bounded by the
// per-attempt timeout (whose cause is ErrTimeout), starting now, its timer
// armed by wc.arm; wc.release ends it. wc is nil when there is no timeout
// (its methods then do nothing), and the attempts' context is ctx.
func (e *engine) waveContext(ctx context.Context) (actx context.Context, wc *waveCtx) {
	if e.cfg.Timeout <= 0 {
		return ctx, nil
	}
	if e.clock == nil {
		e.clock = newWaveClock(ctx, e.cfg.Timeout)
	}
	wc = e.clock.next()
	return wc, wc
}

// trace keeps the wave's marks for the burst's trace.
func (e *engine) trace(wave int) {
	for i, w := range e.workers {
		tr := WorkerTrace{Worker: w.ID, Replica: w.Replica, Wave: wave, Outcome: e.outs[i].Class}
		if err := e.outs[i].Err; err != nil {
			tr.Err = err.Error()
		}
		if k := len(e.cur); k < cap(e.cur) {
			e.cur = e.cur[:k+1]
			tr.Marks = append(e.cur[k].Marks[:0], w.marks...)
			e.cur[k] = tr
		} else {
			tr.Marks = append([]Mark(nil), w.marks...)
			e.cur = append(e.cur, tr)
		}
	}
}

// newWave counts n attempts down.
func newWave(n int) *waveDone {
	d := &waveDone{all: make(chan struct{})}
	d.left.Store(int64(n))
	return d
}

// watch starts d's hang watch: past the attempt timeout by hangGrace,
// await gives up on the attempts. A gate wave's last worker released arms
// it, with the attempt timeout (see wave); a wire wave once its bytes are
// released.
func (e *engine) watch(d *waveDone) {
	if e.cfg.Timeout > 0 {
		d.watch.Store(time.AfterFunc(e.cfg.Timeout+hangGrace, d.expire))
	}
}

// await waits for the wave's attempts, or until its watch ran out
// (ErrHung).
func (e *engine) await(d *waveDone) error {
	<-d.all
	if t := d.watch.Load(); t != nil {
		t.Stop()
	}
	if d.state.Load() == waveHung {
		e.hung = true
		return fmt.Errorf("%w (%s + %s grace)", ErrHung, e.cfg.Timeout, hangGrace)
	}
	return nil
}

func (e *engine) snapshot(b Burst) *Trace {
	tr := &Trace{Burst: b.Index, Effects: b.Effects, Allowed: b.Allowed, Twin: b.Twin != nil, Workers: make([]WorkerTrace, len(e.cur))}
	for i, w := range e.cur {
		w.Marks = append([]Mark(nil), w.Marks...)
		tr.Workers[i] = w
	}
	return tr
}
