package incidents

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target    = (*leaseTarget)(nil)
	_ runner.Describer = (*leaseTarget)(nil)
	_ runner.Noter     = (*leaseTarget)(nil)
	_ runner.Checker   = (*leaseTarget)(nil)
	_ runner.Closer    = (*leaseTarget)(nil)
)

// leaseBackend is a lease service with fencing tokens and the resource it
// protects, both in one store.
type leaseBackend interface {
	Prepare(ctx context.Context) error
	// Reset makes key's lease free and its resource unwritten.
	Reset(ctx context.Context, key string) error
	Open(ctx context.Context, workers int) (leasePool, error)
	// Writes counts the writes the resource accepted: the ground truth.
	Writes(ctx context.Context, key string) (int, error)
	Cleanup(ctx context.Context) error
	Close() error
	Server() string
}

type leasePool interface {
	Conn(ctx context.Context) (leaseConn, error)
	Close() error
}

type leaseConn interface {
	// Acquire grants key to owner for ttl if it is free or expired, with a
	// fencing token one higher than the last grant's.
	Acquire(ctx context.Context, key, owner string, ttl time.Duration) (granted bool, token int64, err error)
	// Done reports whether the resource has been written. Fenced, the check
	// carries the token too: the store raises the highest token it has seen,
	// so that no lower token can write after this check.
	Done(ctx context.Context, key string, token int64, fenced bool) (bool, error)
	// Write writes the resource; fenced, the store refuses a token lower
	// than the highest it has accepted.
	Write(ctx context.Context, key, owner string, token int64, fenced bool) (accepted bool, err error)
	// Release frees the lease: compare, only if owner still holds it;
	// otherwise whoever holds it (a plain DEL).
	Release(ctx context.Context, key, owner string, compare bool) (released bool, err error)
	Close() error
}

type leaseFactory func(ctx context.Context, p scenarios.Params) (leaseBackend, error)

func leaseFactoryOf(backend leaseFactory) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		v, err := leaseVariants.pick(LeasePause, p.Variant)
		if err != nil {
			return nil, err
		}
		if p.TTL == 0 {
			p.TTL = scenarios.DefaultTTL
		}
		if p.TTL < 10*time.Millisecond {
			return nil, fmt.Errorf("lease-pause: --ttl %s is too short to tell a pause from a round trip; use 10ms or more", p.TTL)
		}
		lb, err := backend(ctx, p)
		if err != nil {
			return nil, err
		}
		return &leaseTarget{p: p, variant: v, store: lb}, nil
	}
}

// leaseTarget is lease-pause on one backend for one run.
type leaseTarget struct {
	p       scenarios.Params
	variant string
	store   leaseBackend

	mu      sync.Mutex
	fenced  int // late writes the store refused
	bursts  int
	written int
}

// pause is how long the first holder stalls: past its TTL by half of it.
func (t *leaseTarget) pause() time.Duration { return t.p.TTL * 3 / 2 }

// poll is how often a waiting worker asks for the lease again.
func (t *leaseTarget) poll() time.Duration { return max(t.p.TTL/10, time.Millisecond) }

func (t *leaseTarget) fencing() bool { return t.variant == Fenced }

func (t *leaseTarget) Prepare(ctx context.Context) error {
	return prepareOrUndo(ctx, t.store.Prepare, t.store.Cleanup)
}
func (t *leaseTarget) Cleanup(ctx context.Context) error { return t.store.Cleanup(ctx) }
func (t *leaseTarget) Close() error                      { return t.store.Close() }
func (t *leaseTarget) Server() string                    { return t.store.Server() }

func (t *leaseTarget) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	key := t.p.Prefix() + "lease" + strconv.Itoa(burst)
	if err := t.store.Reset(ctx, key); err != nil {
		return runner.Subject{}, err
	}
	return runner.Subject{Burst: burst, Key: key}, nil
}

func (t *leaseTarget) Effects(ctx context.Context, s runner.Subject) (int, error) {
	n, err := t.store.Writes(ctx, s.Key)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.bursts++
	t.written += n
	t.mu.Unlock()
	return n, nil
}

func (t *leaseTarget) Notes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	mode := "no fencing, release by plain delete"
	if t.fencing() {
		mode = "fencing token checked by the store on every write, release by compare-and-delete"
	}
	notes := []string{fmt.Sprintf("lease-pause: TTL %s; the first holder of each lease pauses %s in process before writing; %s; writes counted by the resource in the store",
		t.p.TTL, t.pause(), mode)}
	if t.fencing() && t.bursts > 0 {
		notes = append(notes, fmt.Sprintf("the store refused %d late writes in %d bursts (stale fencing token)", t.fenced, t.bursts))
	}
	return notes
}

func (t *leaseTarget) Open(ctx context.Context, replica, workers int) (runner.App, error) {
	pool, err := t.store.Open(ctx, workers)
	if err != nil {
		return nil, err
	}
	return &leaseApp{t: t, replica: replica, pool: pool}, nil
}

type leaseApp struct {
	t       *leaseTarget
	replica int
	pool    leasePool
}

func (a *leaseApp) Session(ctx context.Context, worker int) (runner.Session, error) {
	c, err := a.pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &leaseSession{t: a.t, c: c, owner: fmt.Sprintf("r%d-w%d", a.replica, worker)}, nil
}

func (a *leaseApp) Close() error { return a.pool.Close() }

type leaseSession struct {
	t     *leaseTarget
	c     leaseConn
	owner string
}

func (s *leaseSession) Close() error { return s.c.Close() }

var (
	errJobDone  = errors.New("job already done by an earlier holder")
	errGaveUp   = errors.New("lease still held: gave up waiting")
	errFenced   = errors.New("write refused: fencing token older than one the store accepted")
	errNotValid = errors.New("lease not granted")
)

// Attempt waits for the lease, checks the job is not done, and writes. The
// holder of the first grant pauses past its TTL between the check and the
// write, as a stopped process would.
func (s *leaseSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	t := s.t
	giveUp := time.Now().Add(t.pause() + 2*t.p.TTL)
	for {
		granted, token, err := s.c.Acquire(ctx, subj.Key, s.owner, t.p.TTL)
		if err != nil {
			return runner.Failed(fmt.Errorf("acquire: %w", err))
		}
		if granted {
			w.Step(ctx, "lease")
			return s.hold(ctx, subj.Key, token, w)
		}
		if time.Now().After(giveUp) {
			return runner.Refused(errGaveUp)
		}
		if err := sleep(ctx, t.poll()); err != nil {
			return runner.Failed(err)
		}
	}
}

func (s *leaseSession) hold(ctx context.Context, key string, token int64, w *runner.Worker) runner.Outcome {
	t := s.t
	w.Step(ctx, "check")
	done, err := s.c.Done(ctx, key, token, t.fencing())
	if err != nil {
		return runner.Failed(fmt.Errorf("check: %w", err))
	}
	if done {
		s.c.Release(ctx, key, s.owner, t.fencing())
		return runner.Refused(errJobDone)
	}
	if token == 1 {
		w.Step(ctx, "pause")
		if err := sleep(ctx, t.pause()); err != nil {
			return runner.Failed(err)
		}
	}
	w.Step(ctx, "act")
	accepted, err := s.c.Write(ctx, key, s.owner, token, t.fencing())
	if err != nil {
		return runner.Failed(fmt.Errorf("write: %w", err))
	}
	if _, err := s.c.Release(ctx, key, s.owner, t.fencing()); err != nil {
		return runner.Failed(fmt.Errorf("release: %w", err))
	}
	if !accepted {
		t.mu.Lock()
		t.fenced++
		t.mu.Unlock()
		return runner.Refused(fmt.Errorf("%w (token %d)", errFenced, token))
	}
	return runner.Done()
}

// sleep pauses for d on a timer. Pauses and polls need no microsecond
// precision, and eight pollers finishing their waits with wait's spin would
// take the CPU from the attempts on a small machine.
func sleep(ctx context.Context, d time.Duration) error { return scenarios.Sleep(ctx, d) }

// Checks shows the release trap on this backend, with two holders scripted
// in turn: the first pauses past its TTL, the second takes the lease, the
// first releases late.
func (t *leaseTarget) Checks(ctx context.Context) []runner.Check {
	return []runner.Check{
		t.releaseCheck(ctx, false, "a plain delete frees the next holder's lease", true),
		t.releaseCheck(ctx, true, "compare-and-delete leaves the next holder's lease", false),
	}
}

func (t *leaseTarget) releaseCheck(ctx context.Context, compare bool, name string, bug bool) runner.Check {
	c := runner.Check{Name: name, Bug: bug}
	detail, ok, err := t.releaseReplay(ctx, compare)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	c.OK, c.Detail = ok, detail
	return c
}

func (t *leaseTarget) releaseReplay(ctx context.Context, compare bool) (detail string, ok bool, err error) {
	key := t.p.Prefix() + "chk-release-plain"
	if compare {
		key = t.p.Prefix() + "chk-release-cad"
	}
	if err := t.store.Reset(ctx, key); err != nil {
		return "", false, err
	}
	pool, err := t.store.Open(ctx, 1)
	if err != nil {
		return "", false, err
	}
	defer pool.Close()
	c, err := pool.Conn(ctx)
	if err != nil {
		return "", false, err
	}
	defer c.Close()
	if g, _, err := c.Acquire(ctx, key, "first", t.p.TTL); err != nil || !g {
		return "", false, fmt.Errorf("the first holder could not take a free lease: %w", errors.Join(err, errNotValid))
	}
	if err := sleep(ctx, t.pause()); err != nil {
		return "", false, err
	}
	// The second holder's TTL outlasts the check, so only a release can
	// free its lease.
	long := 20 * t.p.TTL
	g2, tok2, err := c.Acquire(ctx, key, "second", long)
	if err != nil || !g2 {
		return "", false, fmt.Errorf("the second holder was not granted the expired lease: %w", errors.Join(err, errNotValid))
	}
	released, err := c.Release(ctx, key, "first", compare)
	if err != nil {
		return "", false, err
	}
	g3, tok3, err := c.Acquire(ctx, key, "third", t.p.TTL)
	if err != nil {
		return "", false, err
	}
	how := "plain delete"
	if compare {
		how = "compare-and-delete"
	}
	detail = fmt.Sprintf("the first holder paused %s (its TTL: %s), the second took the lease (token %d, %s TTL), the first woke and released it by %s: released=%v; a third asked at once: granted=%v",
		t.pause(), t.p.TTL, tok2, long, how, released, g3)
	if g3 {
		detail += fmt.Sprintf(" (token %d, while the second still held it)", tok3)
	}
	if compare {
		return detail, !released && !g3, nil
	}
	return detail, released && g3, nil
}
