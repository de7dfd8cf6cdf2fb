package incidents

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
)

// The embedded backend's side of each incident: small in-process stores with
// the same simulated round trip as memstore (--latency), so that the windows
// between a check and an act exist as they do against a server.

// errStoreDown is what the embedded store answers when a variant says it is
// unreachable, as a refused connection would.
var errStoreDown = errors.New("store unreachable (simulated: connection refused)")

// wait is the embedded store's precise pause (memstore.Wait): Go timers wake
// with about a millisecond of granularity here, far coarser than a round trip.
func wait(ctx context.Context, d time.Duration) error { return memstore.Wait(ctx, d) }

// roundTrip runs op under mu between the two halves of a simulated round
// trip: the change is atomic at the "server", and the caller learns of it
// half a round trip later.
func roundTrip(ctx context.Context, latency time.Duration, mu *sync.Mutex, op func()) error {
	if err := wait(ctx, latency/2); err != nil {
		return err
	}
	mu.Lock()
	op()
	mu.Unlock()
	return wait(ctx, latency-latency/2)
}

// nopCloser gives the embedded store's connections a Close.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// ---- claims (alert-dedupe, job-window) ----

// memClaims is SET key NX PX on the embedded store, in one of three states:
// up, down (every call refused at once) or hung (no call ever answers).
type memClaims struct {
	latency time.Duration
	mode    storeMode

	mu     sync.Mutex
	expiry map[string]time.Time
}

func memClaimsBackend(_ context.Context, p scenarios.Params, mode storeMode) (claimsBackend, error) {
	return &memClaims{latency: p.Latency, mode: mode, expiry: map[string]time.Time{}}, nil
}

func (m *memClaims) Prepare(context.Context) error { return nil }
func (m *memClaims) Cleanup(context.Context) error {
	m.mu.Lock()
	m.expiry = map[string]time.Time{}
	m.mu.Unlock()
	return nil
}
func (m *memClaims) Close() error   { return nil }
func (m *memClaims) Server() string { return "" }
func (m *memClaims) Where() string  { return "the embedded store" }

func (m *memClaims) Open(context.Context, int) (claimPool, error) { return memClaimPool{m}, nil }

// Hung returns a connection to a store that accepts and never answers.
func (m *memClaims) Hung(context.Context) (claimConn, func(), error) {
	return hungClaims{}, func() {}, nil
}

type memClaimPool struct{ m *memClaims }

func (p memClaimPool) Conn(context.Context) (claimConn, error) {
	switch p.m.mode {
	case storeDown:
		return downClaims{latency: p.m.latency}, nil
	case storeHung:
		return hungClaims{}, nil
	}
	return p.m, nil
}
func (memClaimPool) Close() error { return nil }

func (m *memClaims) Claim(ctx context.Context, key string, ttl time.Duration) (claimed bool, err error) {
	err = roundTrip(ctx, m.latency, &m.mu, func() {
		now := time.Now()
		if until, ok := m.expiry[key]; ok && now.Before(until) {
			return
		}
		m.expiry[key] = now.Add(ttl)
		claimed = true
	})
	return claimed, err
}

// downClaims answers every claim with a refused connection, which takes a
// round trip to learn.
type downClaims struct {
	nopCloser
	latency time.Duration
}

func (d downClaims) Claim(ctx context.Context, _ string, _ time.Duration) (bool, error) {
	if err := wait(ctx, d.latency); err != nil {
		return false, err
	}
	return false, errStoreDown
}

type hungClaims struct{ nopCloser }

func (hungClaims) Claim(ctx context.Context, _ string, _ time.Duration) (bool, error) {
	<-ctx.Done()
	return false, fmt.Errorf("claim: no answer: %w", context.Cause(ctx))
}

// ---- leases (lease-pause) ----

// memLeases is the embedded lease service and the resource it protects.
type memLeases struct {
	latency time.Duration

	mu        sync.Mutex
	leases    map[string]memLease
	resources map[string]*memResource
}

type memLease struct {
	owner string
	until time.Time
	fence int64 // the last token granted
}

type memResource struct {
	writes    int   // accepted writes: the ground truth
	lastToken int64 // the highest fencing token the resource has seen
}

func memLeaseBackend(_ context.Context, p scenarios.Params) (leaseBackend, error) {
	return &memLeases{latency: p.Latency, leases: map[string]memLease{}, resources: map[string]*memResource{}}, nil
}

func (m *memLeases) Prepare(context.Context) error { return nil }
func (m *memLeases) Reset(_ context.Context, key string) error {
	m.mu.Lock()
	m.resources[key] = &memResource{}
	m.mu.Unlock()
	return nil
}
func (m *memLeases) Cleanup(context.Context) error {
	m.mu.Lock()
	m.leases, m.resources = map[string]memLease{}, map[string]*memResource{}
	m.mu.Unlock()
	return nil
}
func (m *memLeases) Close() error                                 { return nil }
func (m *memLeases) Server() string                               { return "" }
func (m *memLeases) Open(context.Context, int) (leasePool, error) { return memLeasePool{m}, nil }

func (m *memLeases) Writes(_ context.Context, key string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.resources[key]; r != nil {
		return r.writes, nil
	}
	return 0, nil
}

type memLeasePool struct{ m *memLeases }

func (p memLeasePool) Conn(context.Context) (leaseConn, error) { return memLeaseConn(p), nil }
func (memLeasePool) Close() error                              { return nil }

type memLeaseConn struct{ m *memLeases }

func (memLeaseConn) Close() error { return nil }

func (c memLeaseConn) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (granted bool, token int64, err error) {
	m := c.m
	err = roundTrip(ctx, m.latency, &m.mu, func() {
		now := time.Now()
		l := m.leases[key]
		if l.owner != "" && now.Before(l.until) {
			return
		}
		token = l.fence + 1
		m.leases[key] = memLease{owner: owner, until: now.Add(ttl), fence: token}
		granted = true
	})
	return granted, token, err
}

func (c memLeaseConn) Done(ctx context.Context, key string, token int64, fenced bool) (done bool, err error) {
	m := c.m
	err = roundTrip(ctx, m.latency, &m.mu, func() {
		r := m.resources[key]
		if r == nil {
			r = &memResource{}
			m.resources[key] = r
		}
		if fenced {
			r.lastToken = max(r.lastToken, token)
		}
		done = r.writes > 0
	})
	return done, err
}

func (c memLeaseConn) Write(ctx context.Context, key, _ string, token int64, fenced bool) (accepted bool, err error) {
	m := c.m
	err = roundTrip(ctx, m.latency, &m.mu, func() {
		r := m.resources[key]
		if r == nil {
			r = &memResource{}
			m.resources[key] = r
		}
		if fenced && token < r.lastToken {
			return
		}
		r.writes++
		r.lastToken = max(r.lastToken, token)
		accepted = true
	})
	return accepted, err
}

func (c memLeaseConn) Release(ctx context.Context, key, owner string, compare bool) (released bool, err error) {
	m := c.m
	err = roundTrip(ctx, m.latency, &m.mu, func() {
		l, ok := m.leases[key]
		if !ok || l.owner == "" || (compare && l.owner != owner) {
			return
		}
		// The fencing counter outlives the lease, as INCR fence:<key> does.
		m.leases[key] = memLease{fence: l.fence}
		released = true
	})
	return released, err
}

// ---- ledger (reward-payout) ----

// memLedger is the reward tables on the embedded store: records (with or
// without UNIQUE(user_id, reward_id)) and in-store payments, with
// transactions that behave like InnoDB's: an inserted record holds its
// unique key until commit or rollback, and a rollback removes it.
type memLedger struct {
	latency time.Duration
	unique  bool

	mu       sync.Mutex
	nextID   int64
	records  map[string]int // committed records per user+reward
	payments map[string]int // committed payments per user+reward
	keyLocks map[string]chan struct{}
}

func memLedgerBackend(_ context.Context, p scenarios.Params, unique bool) (ledgerBackend, error) {
	return &memLedger{
		latency: p.Latency, unique: unique,
		records: map[string]int{}, payments: map[string]int{}, keyLocks: map[string]chan struct{}{},
	}, nil
}

func ledgerKey(user, reward string) string { return user + "\x00" + reward }

func (m *memLedger) Prepare(context.Context) error { return nil }
func (m *memLedger) Cleanup(context.Context) error { return nil }
func (m *memLedger) Close() error                  { return nil }
func (m *memLedger) Server() string                { return "" }
func (m *memLedger) Engine() (string, bool)        { return "embedded store", true }
func (m *memLedger) Open(context.Context, int) (ledgerPool, error) {
	return memLedgerPool{m}, nil
}

func (m *memLedger) Counts(_ context.Context, user, reward string) (records, payments int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := ledgerKey(user, reward)
	return m.records[k], m.payments[k], nil
}

// keyLock is the lock a transaction's insert holds on a unique key.
func (m *memLedger) keyLock(k string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.keyLocks[k]
	if !ok {
		l = make(chan struct{}, 1)
		m.keyLocks[k] = l
	}
	return l
}

func lock(ctx context.Context, l chan struct{}) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type memLedgerPool struct{ m *memLedger }

func (p memLedgerPool) Conn(context.Context) (ledgerConn, error) { return &memLedgerConn{m: p.m}, nil }
func (memLedgerPool) Close() error                               { return nil }

// memLedgerConn is one worker's connection; in a transaction it holds the
// unique keys it inserted and its pending changes.
type memLedgerConn struct {
	m       *memLedger
	inTx    bool
	held    []chan struct{}
	pending []func() // applied at commit
}

var errNotNull = errors.New(`NOT NULL constraint failed: amount (injected failure)`)

func (c *memLedgerConn) Close() error { return nil }

func (c *memLedgerConn) HasRecord(ctx context.Context, user, reward string) (found bool, err error) {
	m := c.m
	err = roundTrip(ctx, m.latency, &m.mu, func() { found = m.records[ledgerKey(user, reward)] > 0 })
	return found, err
}

func (c *memLedgerConn) Record(ctx context.Context, user, reward string, amount *int) (id int64, err error) {
	m := c.m
	if amount == nil {
		if err := wait(ctx, m.latency); err != nil {
			return 0, err
		}
		return 0, errNotNull
	}
	k := ledgerKey(user, reward)
	if m.unique {
		// A unique insert waits for a transaction that inserted the same key,
		// as InnoDB's duplicate check waits on the row lock.
		l := m.keyLock(k)
		if err := lock(ctx, l); err != nil {
			return 0, err
		}
		if c.inTx {
			c.held = append(c.held, l)
		} else {
			defer func() { <-l }()
		}
	}
	var dup bool
	terr := roundTrip(ctx, m.latency, &m.mu, func() {
		if m.unique && m.records[k] > 0 {
			dup = true
			return
		}
		m.nextID++
		id = m.nextID
		if c.inTx {
			c.pending = append(c.pending, func() { m.records[k]++ })
			return
		}
		m.records[k]++
	})
	if terr != nil {
		return 0, terr
	}
	if dup {
		return 0, fmt.Errorf("%w: user %s already has reward %s", errDuplicate, user, reward)
	}
	return id, nil
}

func (c *memLedgerConn) Pay(ctx context.Context, user, reward string, amount *int) error {
	m := c.m
	if amount == nil {
		if err := wait(ctx, m.latency); err != nil {
			return err
		}
		return errNotNull
	}
	k := ledgerKey(user, reward)
	return roundTrip(ctx, m.latency, &m.mu, func() {
		if c.inTx {
			c.pending = append(c.pending, func() { m.payments[k]++ })
			return
		}
		m.payments[k]++
	})
}

func (c *memLedgerConn) Begin(context.Context) (ledgerTx, error) {
	c.inTx, c.held, c.pending = true, nil, nil
	return c, nil
}

func (c *memLedgerConn) Commit() error   { return c.end(true) }
func (c *memLedgerConn) Rollback() error { return c.end(false) }

func (c *memLedgerConn) end(commit bool) error {
	if !c.inTx {
		return nil
	}
	c.m.mu.Lock()
	if commit {
		for _, f := range c.pending {
			f()
		}
	}
	c.m.mu.Unlock()
	for _, l := range c.held {
		<-l
	}
	c.inTx, c.held, c.pending = false, nil, nil
	return nil
}
