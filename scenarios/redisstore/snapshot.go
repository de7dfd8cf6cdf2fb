package redisstore

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/runner"
)

// MaxSnapshotKeys is the most keys a --effects auto snapshot reads.
const MaxSnapshotKeys = 100_000

// maxSnapshotKeys is the limit a run applies (tests lower it).
var maxSnapshotKeys = MaxSnapshotKeys

// runPrefix starts the keys of racetest's runs (this one's and others'):
// a pattern reads them only when it starts with it too.
const runPrefix = "racetest_"

// Snapshot measures the keys under each pattern once, with a Snapshotter
// of its own: a key that expires between two calls is not told from one
// deleted (Snapshotter.Snapshot says how a run's snapshots tell them).
func Snapshot(ctx context.Context, c redis.Cmdable, patterns []string) (runner.Snapshot, error) {
	return (&Snapshotter{}).Snapshot(ctx, c, patterns)
}

// A Snapshotter measures the keys under the watched patterns for
// --effects auto, snapshot after snapshot of one run.
//
// A key with a time to live that is gone once its time is up has
// expired: the server removed it, no writer did, and no change of the
// store is put down to its going. So a key that expired is still counted,
// as it was last measured, in every later snapshot (the keys of a rate
// limiter, one per subject, expire one after another through a run
// without changing anything); one of its name made again after that is a
// new key. A key gone before its time was deleted, by an attempt or by
// another writer, and is a change like any other; so is a time to live
// set or removed (PATTERN.expiring).
type Snapshotter struct {
	// timed are the keys of the last snapshot that had a time to live.
	timed map[string]timedKey
	// expired sums, by pattern, the keys that expired as last measured.
	expired map[string]*measure
}

// measure is what a snapshot reads of keys: how many, the sum of their
// numbers, their members, and how many have a time to live.
type measure struct{ rows, value, members, expiring *big.Rat }

func newMeasure() *measure {
	return &measure{new(big.Rat), new(big.Rat), new(big.Rat), new(big.Rat)}
}

func (m *measure) add(o *measure) {
	m.rows.Add(m.rows, o.rows)
	m.value.Add(m.value, o.value)
	m.members.Add(m.members, o.members)
	m.expiring.Add(m.expiring, o.expiring)
}

// timedKey is a key that had a time to live: under which pattern it was
// counted, what it held, and when it expires at the latest (its time to
// live from when it was asked for: the server counts from a later
// instant, so the key is never taken for expired before its time).
type timedKey struct {
	pattern string
	m       *measure
	expires time.Time
}

// Snapshot measures the keys under each pattern: how many there are
// ("PATTERN rows"), the sum of the numeric values of its strings and hash
// fields ("PATTERN.value"), the members of its sets, lists, sorted sets
// and hashes ("PATTERN.members"), and how many have a time to live
// ("PATTERN.expiring"), keys that expired counted as last measured. A key
// is read once, under the first pattern that matches it; a key of
// racetest's runs (racetest_…) only under a pattern that names them.
func (s *Snapshotter) Snapshot(ctx context.Context, c redis.Cmdable, patterns []string) (runner.Snapshot, error) {
	if len(patterns) == 0 {
		return nil, &runner.SnapshotError{Msg: "--effects auto on Redis measures the keys --watch names: add --watch 'PATTERN,…' (e.g. --watch 'coupon:*,redeemed:*')"}
	}
	if s.expired == nil {
		s.expired = map[string]*measure{}
	}
	snap := runner.Snapshot{}
	seen := map[string]bool{}    // scanned
	present := map[string]bool{} // measured: still there
	timed := map[string]timedKey{}
	for _, p := range patterns {
		var keys []string
		iter := c.Scan(ctx, 0, p, 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			if seen[k] || strings.HasPrefix(k, runPrefix) && !strings.HasPrefix(p, runPrefix) {
				continue
			}
			seen[k] = true
			keys = append(keys, k)
			if len(seen) > maxSnapshotKeys {
				return nil, &runner.SnapshotError{Msg: fmt.Sprintf("--watch %s: more than %d keys to read per burst — narrow the pattern to the keys the attempt writes ({{.RunID}} is the run's id), or count the effects with --effects COMMAND", p, maxSnapshotKeys)}
			}
		}
		if err := iter.Err(); err != nil {
			return nil, fmt.Errorf("redis: snapshot of %s: %w", p, err)
		}
		all := newMeasure()
		for _, k := range keys {
			m, expires, err := measureKey(ctx, c, k)
			if err != nil {
				return nil, fmt.Errorf("redis: snapshot of %s: %w", k, err)
			}
			if m == nil {
				continue // gone since the scan
			}
			present[k] = true
			all.add(m)
			if !expires.IsZero() {
				timed[k] = timedKey{pattern: p, m: m, expires: expires}
			}
		}
		snap[p+runner.RowsSuffix], snap[p+".value"], snap[p+".members"] = all.rows, all.value, all.members
		if all.expiring.Sign() != 0 {
			snap[p+".expiring"] = all.expiring
		}
	}
	// A key that had a time to live and is gone past it expired: it stays
	// counted as it was. (One that is there again past it may have
	// expired and been made again, or had its time to live renewed
	// before it was up, as a lease is: it is taken for the same key.)
	now := time.Now()
	for k, t := range s.timed {
		if present[k] || now.Before(t.expires) {
			continue
		}
		if s.expired[t.pattern] == nil {
			s.expired[t.pattern] = newMeasure()
		}
		s.expired[t.pattern].add(t.m)
	}
	s.timed = timed
	for p, m := range s.expired {
		if snap[p+runner.RowsSuffix] == nil {
			continue // no longer watched
		}
		for key, v := range map[string]*big.Rat{p + runner.RowsSuffix: m.rows, p + ".value": m.value, p + ".members": m.members, p + ".expiring": m.expiring} {
			snap[key] = new(big.Rat).Add(orZero(snap[key]), v)
		}
	}
	return snap, nil
}

func orZero(r *big.Rat) *big.Rat {
	if r == nil {
		return new(big.Rat)
	}
	return r
}

// measureKey reads one key: its measure, nil when it is gone, and when it
// expires at the latest (zero: it has no time to live).
func measureKey(ctx context.Context, c redis.Cmdable, k string) (*measure, time.Time, error) {
	asked := time.Now()
	var typ *redis.StatusCmd
	var ttl *redis.DurationCmd
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		typ, ttl = p.Type(ctx, k), p.PTTL(ctx, k)
		return nil
	}); err != nil {
		return nil, time.Time{}, err
	}
	m := newMeasure()
	m.rows.SetInt64(1)
	var expires time.Time
	// PTTL is -1 for a key without a time to live, -2 for none, and 0 for
	// one in its last millisecond: a time to live still.
	if d := ttl.Val(); d >= 0 {
		expires = asked.Add(d)
		m.expiring.SetInt64(1)
	}
	var n int64
	var err error
	switch typ.Val() {
	case "none":
		return nil, time.Time{}, nil
	case "string":
		v, err := c.Get(ctx, k).Result()
		if err == redis.Nil {
			return nil, time.Time{}, nil
		}
		if err != nil {
			return nil, time.Time{}, err
		}
		addNumber(m.value, v)
		return m, expires, nil
	case "hash":
		vals, err := c.HVals(ctx, k).Result()
		if err != nil {
			return nil, time.Time{}, err
		}
		for _, v := range vals {
			addNumber(m.value, v)
		}
		n = int64(len(vals))
	case "set":
		n, err = c.SCard(ctx, k).Result()
	case "list":
		n, err = c.LLen(ctx, k).Result()
	case "zset":
		n, err = c.ZCard(ctx, k).Result()
	case "stream":
		n, err = c.XLen(ctx, k).Result()
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	m.members.SetInt64(n)
	return m, expires, nil
}

// addNumber adds v to sum when it reads as a number.
func addNumber(sum *big.Rat, v string) {
	if r, ok := new(big.Rat).SetString(strings.TrimSpace(v)); ok {
		sum.Add(sum, r)
	}
}
