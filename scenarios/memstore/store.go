// Package memstore is the embedded backend: an in-process shared store with
// the primitives each pattern needs, and a simulated round trip so that a
// race window exists on a laptop as it does against a real database.
package memstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/racetest/racetest/scenarios"
)

// ErrDuplicate is the store's unique-constraint violation.
var ErrDuplicate = errors.New("duplicate key")

// Store is the shared state every replica of a run talks to: the database of
// the embedded backend. Every method is one round trip: it waits half the
// latency, applies its change atomically, and waits the other half.
type Store struct {
	latency time.Duration
	now     func() time.Time
	// jitter, when set, varies each round trip by up to ±jitterShare, as a
	// network does; seeded so that the run's choices can be repeated.
	jitterMu sync.Mutex
	jitter   *rand.Rand

	mu     sync.Mutex
	rows   map[string]int    // rows written per key (the effects of inserts)
	values map[string]string // one value per key (status columns, flags)
	leases map[string]lease
	grants map[string][]scenarios.Grant
}

type lease struct {
	owner string
	until time.Time
	fence int64
}

// NewStore returns an empty store with the given simulated round trip.
func NewStore(latency time.Duration) *Store {
	return &Store{
		latency: latency,
		now:     time.Now,
		rows:    map[string]int{},
		values:  map[string]string{},
		leases:  map[string]lease{},
		grants:  map[string][]scenarios.Grant{},
	}
}

// trip runs op between the two halves of a round trip.
func (s *Store) trip(ctx context.Context, op func()) error {
	rtt := s.roundTrip()
	if err := s.wait(ctx, rtt/2); err != nil {
		return err
	}
	s.mu.Lock()
	op()
	s.mu.Unlock()
	return s.wait(ctx, rtt-rtt/2)
}

// jitterShare is how far a round trip may stray from the latency.
const jitterShare = 0.2

// Seed makes every round trip vary by up to ±20% of the latency, drawn from
// a generator seeded with seed.
func (s *Store) Seed(seed int64) {
	s.jitter = rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
}

func (s *Store) roundTrip() time.Duration {
	if s.jitter == nil || s.latency == 0 {
		return s.latency
	}
	s.jitterMu.Lock()
	f := 1 + jitterShare*(2*s.jitter.Float64()-1)
	s.jitterMu.Unlock()
	return time.Duration(float64(s.latency) * f)
}

func (s *Store) wait(ctx context.Context, d time.Duration) error { return Wait(ctx, d) }

// timerSlack is how late a timer may fire here: Go's timers wake with about
// a millisecond of granularity on Linux, far coarser than a local round trip.
const timerSlack = 1500 * time.Microsecond

// Wait pauses for d, honouring ctx. A timer covers all but the last
// timerSlack; the rest is a yielding spin, so that a 200µs round trip takes
// 200µs and not a millisecond.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	deadline := time.Now().Add(d)
	if d > timerSlack {
		t := time.NewTimer(d - timerSlack)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	for i := 0; time.Now().Before(deadline); i++ {
		if i%64 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		runtime.Gosched()
	}
	return nil
}

// Count returns how many rows key has (a read).
func (s *Store) Count(ctx context.Context, key string) (n int, err error) {
	err = s.trip(ctx, func() { n = s.rows[key] })
	return n, err
}

// Insert adds a row under key, with no constraint.
func (s *Store) Insert(ctx context.Context, key string) error {
	return s.trip(ctx, func() { s.rows[key]++ })
}

// InsertUnique adds a row under key unless one exists (ErrDuplicate).
func (s *Store) InsertUnique(ctx context.Context, key string) (err error) {
	terr := s.trip(ctx, func() {
		if s.rows[key] > 0 {
			err = ErrDuplicate
			return
		}
		s.rows[key]++
	})
	if terr != nil {
		return terr
	}
	return err
}

// Put sets key's value unconditionally.
func (s *Store) Put(ctx context.Context, key, value string) error {
	return s.trip(ctx, func() { s.values[key] = value })
}

// CompareAndSet sets key to to if it holds from, and reports whether it did.
// Each applied change is also recorded as a row under key, so that the
// effects of a conditional update are counted in the store.
func (s *Store) CompareAndSet(ctx context.Context, key, from, to string) (ok bool, err error) {
	err = s.trip(ctx, func() {
		if s.values[key] == from {
			s.values[key] = to
			s.rows[key]++
			ok = true
		}
	})
	return ok, err
}

// Acquire takes the lease key for owner if it is free or expired, by the
// store's clock. It returns whether it was granted and the grant's fencing
// token (one more than the last grant's).
func (s *Store) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (ok bool, fence int64, err error) {
	err = s.trip(ctx, func() {
		now := s.now()
		l, held := s.leases[key]
		if held && now.Before(l.until) {
			return
		}
		fence = l.fence + 1
		s.leases[key] = lease{owner: owner, until: now.Add(ttl), fence: fence}
		s.grants[key] = append(s.grants[key], scenarios.Grant{From: now, Until: now.Add(ttl)})
		ok = true
	})
	return ok, fence, err
}

// Holders returns the most grants of lease key that were valid at one
// instant: more than one means two holders at once.
func (s *Store) Holders(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return scenarios.MostHolders(s.grants[key])
}

// Drop forgets everything under key.
func (s *Store) Drop(key string) {
	s.mu.Lock()
	delete(s.rows, key)
	delete(s.values, key)
	delete(s.leases, key)
	delete(s.grants, key)
	s.mu.Unlock()
}

// Rows returns key's row count without a simulated round trip: the ground
// truth read after a burst.
func (s *Store) Rows(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[key]
}
