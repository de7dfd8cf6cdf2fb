package incidents

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target     = (*onceTarget)(nil)
	_ runner.Describer  = (*onceTarget)(nil)
	_ runner.Noter      = (*onceTarget)(nil)
	_ runner.Checker    = (*onceTarget)(nil)
	_ runner.Allowancer = (*onceTarget)(nil)
	_ runner.Closer     = (*onceTarget)(nil)
)

// alert-dedupe and job-window are one pattern told twice: "at most once per
// window", remembered first in each replica's memory (a dedupe table), then
// claimed in the shared store with one set-if-absent-with-expiry. This file
// is that pattern; alert.go and job.go are the two incidents' particulars.

// externalRoundTrip is how long a call to the simulated external side (the
// alert sink, the listing API) takes, on every backend: a local HTTP call.
const externalRoundTrip = 200 * time.Microsecond

// scheduleStart is the first window of the simulated schedule. It is fixed,
// not read from the clock, so that every process of a run names the same
// windows.
var scheduleStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// ClaimDeadline bounds a claim in the shared store. Past it the fix fails
// open and acts anyway: 1.5 s, as in the incident.
const ClaimDeadline = 1500 * time.Millisecond

// storeMode is the shared store's health in a variant.
type storeMode int

const (
	storeUp   storeMode = iota
	storeDown           // refuses connections (a dead port)
	storeHung           // accepts and never answers
)

func (m storeMode) String() string {
	return [...]string{"up", "down", "hung"}[m]
}

// claimsBackend is the shared store the fixes claim keys in.
type claimsBackend interface {
	Prepare(ctx context.Context) error
	// Open starts one replica's pool of workers connections.
	Open(ctx context.Context, workers int) (claimPool, error)
	// Hung returns a connection to a store that accepts and never answers,
	// and a func that disposes of it.
	Hung(ctx context.Context) (claimConn, func(), error)
	Cleanup(ctx context.Context) error
	Close() error
	Server() string
	// Where names the store in notes ("Redis at 127.0.0.1:6379").
	Where() string
}

type claimPool interface {
	Conn(ctx context.Context) (claimConn, error)
	Close() error
}

type claimConn interface {
	// Claim sets key if it is absent or expired, to expire after ttl, and
	// reports whether this call set it.
	Claim(ctx context.Context, key string, ttl time.Duration) (bool, error)
	Close() error
}

type claimsFactory func(ctx context.Context, p scenarios.Params, mode storeMode) (claimsBackend, error)

// onceKind is what differs between the two "once per window" incidents.
type onceKind struct {
	scenario string
	variants variants
	window   time.Duration
	// effect names one effect in notes ("alert sent", "listing").
	effect string
	// counter names the simulated external side that counts the effects.
	counter string
	// mode maps a variant to the store's health in it.
	mode func(variant string) storeMode
	// claims reports whether variant claims in the shared store.
	claims func(variant string) bool
	// naivePrune is the dedupe table's prune in variant.
	prune func(variant string) pruneMode
	// subject names burst's subject and the instant its attempts happen.
	subject func(t *onceTarget, burst int) (key string, at time.Time)
	// checks are the scenario's checks for the run.
	checks func(ctx context.Context, t *onceTarget) []runner.Check
	// refusedLocal and refusedClaim are the outcomes' explanations.
	refusedLocal, refusedClaim string
}

func onceFactory(k *onceKind, backend claimsFactory) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		v, err := k.variants.pick(k.scenario, p.Variant)
		if err != nil {
			return nil, err
		}
		t := &onceTarget{kind: k, p: p, variant: v, effects: newTally(), base: scheduleStart}
		if k.claims(v) {
			if t.claims, err = backend(ctx, p, k.mode(v)); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
}

// onceTarget is alert-dedupe or job-window on one backend for one run.
type onceTarget struct {
	kind    *onceKind
	p       scenarios.Params
	variant string
	claims  claimsBackend // nil when the variant keeps to replica memory
	effects *tally        // the simulated external side
	base    time.Time     // the first window's start
	opened  atomic.Bool   // a replica ran in this process

	mu         sync.Mutex
	last       runner.Subject
	bursts     int
	total      int // effects over the run
	allowed    int // allowed over the run
	failedOpen int // effects allowed because the store failed
}

// onceBurst is one subject's record of what the policy allowed.
type onceBurst struct {
	at time.Time

	mu         sync.Mutex
	instances  map[*onceApp]bool // replica instances that acted on their own (P0)
	failedOpen int
	claimed    int
}

func (t *onceTarget) Prepare(ctx context.Context) error {
	if t.claims == nil {
		return nil
	}
	return prepareOrUndo(ctx, t.claims.Prepare, t.claims.Cleanup)
}

func (t *onceTarget) Cleanup(ctx context.Context) error {
	if t.claims == nil {
		return nil
	}
	return t.claims.Cleanup(ctx)
}

// Close releases the backend's own connection; the command calls it after
// the run.
func (t *onceTarget) Close() error {
	if t.claims == nil {
		return nil
	}
	return t.claims.Close()
}

func (t *onceTarget) Server() string {
	if t.claims == nil {
		return ""
	}
	return t.claims.Server()
}

func (t *onceTarget) Reset(_ context.Context, burst int) (runner.Subject, error) {
	key, at := t.kind.subject(t, burst)
	s := runner.Subject{Burst: burst, Key: key, Data: &onceBurst{at: at, instances: map[*onceApp]bool{}}}
	t.mu.Lock()
	t.last = s
	t.mu.Unlock()
	return s, nil
}

func (t *onceTarget) Effects(_ context.Context, s runner.Subject) (int, error) {
	if !t.opened.Load() {
		return 0, errNoReplicaHere(t.kind.scenario, t.kind.effect+"s", t.kind.counter)
	}
	n := t.effects.count(s.Key)
	t.mu.Lock()
	t.bursts++
	t.total += n
	t.mu.Unlock()
	return n, nil
}

// Allowed is what the policy allows for one subject: one effect, plus one
// per attempt that failed open, or one per replica instance for P0.
func (t *onceTarget) Allowed(s runner.Subject, _ [runner.NumClasses]int) int {
	b := s.Data.(*onceBurst)
	b.mu.Lock()
	defer b.mu.Unlock()
	allowed := 1
	switch {
	case t.variant == P0:
		allowed = max(len(b.instances), 1)
	case b.failedOpen > 0:
		// A store that granted two claims must not hide behind the policy:
		// at most one claim counts.
		allowed = b.failedOpen + min(b.claimed, 1)
	}
	t.mu.Lock()
	t.allowed += allowed
	t.failedOpen += b.failedOpen
	t.mu.Unlock()
	return allowed
}

func (t *onceTarget) Notes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.kind
	notes := []string{fmt.Sprintf("%s: %ss counted by %s (a simulated %s call), not by the replicas; window %s",
		k.scenario, k.effect, k.counter, externalRoundTrip, human(k.window))}
	switch {
	case t.claims == nil && t.variant == P0:
		notes = append(notes, fmt.Sprintf("P0 skips the shared claim: allowed one %s per replica instance that saw it — %d of %d %ss allowed by policy",
			k.effect, t.allowed, t.total, k.effect))
	case t.claims == nil:
		notes = append(notes, "naive: the dedupe table lives in each replica's memory (a deploy empties it); the shared store is not used")
	case t.claims != nil && k.mode(t.variant) != storeUp:
		why := "refused the connection"
		if k.mode(t.variant) == storeHung {
			why = fmt.Sprintf("did not answer within the %s deadline", ClaimDeadline)
		}
		notes = append(notes, fmt.Sprintf("fail-open: %s %s; %d of %d %ss in %d bursts were allowed by policy (acted although the claim failed)",
			t.claims.Where(), why, t.failedOpen, t.total, k.effect, t.bursts))
	default:
		notes = append(notes, fmt.Sprintf("claims: SET NX with expiry in %s", t.claims.Where()))
	}
	return notes
}

func (t *onceTarget) Checks(ctx context.Context) []runner.Check {
	if t.kind.checks == nil {
		return nil
	}
	return t.kind.checks(ctx, t)
}

func (t *onceTarget) Open(ctx context.Context, _, workers int) (runner.App, error) {
	t.opened.Store(true)
	a := &onceApp{t: t, table: newDedupeTable(t.kind.prune(t.variant))}
	if t.claims != nil {
		pool, err := t.claims.Open(ctx, workers)
		if err != nil {
			return nil, err
		}
		a.pool = pool
	}
	return a, nil
}

// onceApp is one replica: its dedupe table is its memory, gone at Close.
type onceApp struct {
	t     *onceTarget
	table *dedupeTable
	pool  claimPool
}

func (a *onceApp) Session(ctx context.Context, _ int) (runner.Session, error) {
	s := &onceSession{a: a}
	if a.pool != nil {
		c, err := a.pool.Conn(ctx)
		if err != nil {
			return nil, err
		}
		s.claim = c
	}
	return s, nil
}

func (a *onceApp) Close() error {
	if a.pool != nil {
		return a.pool.Close()
	}
	return nil
}

type onceSession struct {
	a     *onceApp
	claim claimConn
}

func (s *onceSession) Close() error {
	if s.claim != nil {
		return s.claim.Close()
	}
	return nil
}

// Attempt is one trigger on one replica: the replica's own table first,
// then (in the fixes) the shared claim, then the effect.
func (s *onceSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	a, t := s.a, s.a.t
	b := subj.Data.(*onceBurst)
	w.Step(ctx, "check")
	if !a.table.Admit(subj.Key, t.kind.window, b.at) {
		return runner.Refused(errors.New(t.kind.refusedLocal))
	}
	b.mu.Lock()
	b.instances[a] = true
	b.mu.Unlock()
	if s.claim != nil {
		w.Step(ctx, "store-claim")
		claimed, err := claimWithin(ctx, s.claim, subj.Key, t.kind.window)
		switch {
		case err != nil:
			// Fail open, by policy: the effect happens and is allowed.
			w.Step(ctx, "fail-open")
			b.mu.Lock()
			b.failedOpen++
			b.mu.Unlock()
		case !claimed:
			return runner.Refused(errors.New(t.kind.refusedClaim))
		default:
			b.mu.Lock()
			b.claimed++
			b.mu.Unlock()
		}
	}
	w.Step(ctx, "act")
	if err := t.effects.call(ctx, subj.Key, externalRoundTrip); err != nil {
		return runner.Failed(fmt.Errorf("%s: %w", t.kind.effect, err))
	}
	return runner.Done()
}

// claimWithin claims key, giving up after ClaimDeadline.
func claimWithin(ctx context.Context, c claimConn, key string, ttl time.Duration) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, ClaimDeadline)
	defer cancel()
	return c.Claim(cctx, key, ttl)
}

// errNoReplicaHere is the answer of a target asked to count effects that
// only the process running the replicas could have seen: the run's replicas
// are other processes ('racetest run --processes'), and counting 0 here
// would report a false SAFE.
func errNoReplicaHere(scenario, what, counter string) error {
	return fmt.Errorf("%s counts its %s in %s, inside the process whose replicas make them; no replica ran in this one, so it cannot count them — run it without --processes (its replicas are in-process apps, each with its own memory, which is what the incident needs)",
		scenario, what, counter)
}

// tally counts effects per subject on the simulated external side.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func newTally() *tally { return &tally{n: map[string]int{}} }

// call is one call to the external side: it counts on arrival, half a
// round trip after it was sent, and returns half a round trip later.
func (t *tally) call(ctx context.Context, key string, latency time.Duration) error {
	return roundTrip(ctx, latency, &t.mu, func() { t.n[key]++ })
}

func (t *tally) count(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[key]
}

// human prints a duration the way people say it: 24h, 2m, 1.5s.
func human(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	case d >= time.Minute && d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return d.String()
}
