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
	keys, err := s.keys(ctx, c, patterns)
	if err != nil {
		return nil, err
	}
	ms, err := measureKeys(ctx, c, keys.all)
	if err != nil {
		return nil, err
	}
	present := map[string]bool{} // measured: still there
	timed := map[string]timedKey{}
	for i, p := range patterns {
		all := newMeasure()
		for _, k := range keys.of[i] {
			km := ms[k]
			if km.m == nil {
				continue // gone since the scan
			}
			present[k] = true
			all.add(km.m)
			if !km.expires.IsZero() {
				timed[k] = timedKey{pattern: p, m: km.m, expires: km.expires}
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

// watchedKeys are the keys under a snapshot's patterns: all of them, each
// once, and by pattern (of[i] holds the keys first matched by pattern i).
type watchedKeys struct {
	all []string
	of  [][]string
}

// keys finds the keys under the patterns, each under the first that
// matches it, a key of racetest's runs (racetest_…) only under a pattern
// that starts with it too. A pattern with no wildcard names its key: it
// is read, not looked for. The others share one SCAN of the keyspace
// (with MATCH when there is one): a SCAN per pattern walked the whole
// keyspace once each (1,000 keys among 100,000 took 29 s a burst).
func (s *Snapshotter) keys(ctx context.Context, c redis.Cmdable, patterns []string) (watchedKeys, error) {
	w := watchedKeys{of: make([][]string, len(patterns))}
	seen := map[string]bool{}
	add := func(i int, k string) error {
		if seen[k] || strings.HasPrefix(k, runPrefix) && !strings.HasPrefix(patterns[i], runPrefix) {
			return nil
		}
		seen[k] = true
		w.all = append(w.all, k)
		w.of[i] = append(w.of[i], k)
		if len(w.all) > maxSnapshotKeys {
			return &runner.SnapshotError{Msg: fmt.Sprintf("--watch %s: more than %d keys to read per burst — narrow the pattern to the keys the attempt writes ({{.RunID}} is the run's id), or count the effects with --effects COMMAND", patterns[i], maxSnapshotKeys)}
		}
		return nil
	}
	var globs []int
	for i, p := range patterns {
		k, literal := literalKey(p)
		if !literal {
			globs = append(globs, i)
			continue
		}
		// Under an earlier pattern that matches it, the scan counts it.
		earlier := false
		for _, j := range globs {
			earlier = earlier || globMatch(patterns[j], k)
		}
		if !earlier {
			if err := add(i, k); err != nil {
				return w, err
			}
		}
	}
	if len(globs) == 0 {
		return w, nil
	}
	match := ""
	if len(globs) == 1 {
		match = patterns[globs[0]]
	}
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		for _, i := range globs {
			if globMatch(patterns[i], k) {
				if err := add(i, k); err != nil {
					return w, err
				}
				break
			}
		}
	}
	if err := iter.Err(); err != nil {
		return w, fmt.Errorf("redis: snapshot of %s: scanning the keys: %w", strings.Join(patterns, ","), err)
	}
	return w, nil
}

// literalKey is the key a pattern with no wildcard names (its escapes
// undone), and whether it has none.
func literalKey(p string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*', '?', '[':
			return "", false
		case '\\':
			if i+1 < len(p) {
				i++
			}
		}
		b.WriteByte(p[i])
	}
	return b.String(), true
}

// globMatch is Redis's glob-style match (KEYS, SCAN MATCH): * any bytes,
// ? one byte, [abc] [^abc] [a-z] a class, \x the byte x.
func globMatch(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
			p = p[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			rest, ok := matchClass(p[1:], s[0])
			if !ok {
				return false
			}
			p, s = rest, s[1:]
		case '\\':
			if len(p) > 1 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || p[0] != s[0] {
				return false
			}
			p, s = p[1:], s[1:]
		}
	}
	return len(s) == 0
}

// matchClass matches c against the class that p starts (after its '['),
// and returns the pattern past the class's ']' (or its end, as Redis reads
// an unclosed class).
func matchClass(p string, c byte) (string, bool) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	found := false
	for len(p) > 0 && p[0] != ']' {
		switch {
		case p[0] == '\\' && len(p) >= 2:
			found = found || p[1] == c
			p = p[2:]
		case len(p) >= 3 && p[1] == '-':
			lo, hi := p[0], p[2]
			if lo > hi {
				lo, hi = hi, lo
			}
			found = found || lo <= c && c <= hi
			p = p[3:]
		default:
			found = found || p[0] == c
			p = p[1:]
		}
	}
	if len(p) > 0 {
		p = p[1:] // the ']'
	}
	return p, found != not
}

// keyMeasure is what one key held when measured: nil when it was gone,
// and when it expires at the latest (zero: it has no time to live).
type keyMeasure struct {
	m       *measure
	expires time.Time
}

// readBatch is how many keys one pipeline reads: two round trips per
// batch (type and time to live, then the value), not two per key.
const readBatch = 1000

// measureKeys reads the keys in pipelines of readBatch.
func measureKeys(ctx context.Context, c redis.Cmdable, keys []string) (map[string]keyMeasure, error) {
	out := make(map[string]keyMeasure, len(keys))
	for from := 0; from < len(keys); from += readBatch {
		batch := keys[from:min(from+readBatch, len(keys))]
		if err := measureBatch(ctx, c, batch, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func measureBatch(ctx context.Context, c redis.Cmdable, keys []string, out map[string]keyMeasure) error {
	asked := time.Now()
	typs := make([]*redis.StatusCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			typs[i], ttls[i] = p.Type(ctx, k), p.PTTL(ctx, k)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("redis: snapshot: reading the types of %d keys: %w", len(keys), err)
	}
	reads := make([]redis.Cmder, len(keys))
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			switch typs[i].Val() {
			case "string":
				reads[i] = p.Get(ctx, k)
			case "hash":
				reads[i] = p.HVals(ctx, k)
			case "set":
				reads[i] = p.SCard(ctx, k)
			case "list":
				reads[i] = p.LLen(ctx, k)
			case "zset":
				reads[i] = p.ZCard(ctx, k)
			case "stream":
				reads[i] = p.XLen(ctx, k)
			}
		}
		return nil
	}); err != nil && err != redis.Nil {
		return fmt.Errorf("redis: snapshot: reading %d keys: %w", len(keys), err)
	}
	for i, k := range keys {
		if typs[i].Val() == "none" {
			out[k] = keyMeasure{}
			continue
		}
		m := newMeasure()
		m.rows.SetInt64(1)
		var expires time.Time
		// PTTL is -1 for a key without a time to live, -2 for none, and 0
		// for one in its last millisecond: a time to live still.
		if d := ttls[i].Val(); d >= 0 {
			expires = asked.Add(d)
			m.expiring.SetInt64(1)
		}
		switch r := reads[i].(type) {
		case *redis.StringCmd:
			v, err := r.Result()
			if err == redis.Nil {
				out[k] = keyMeasure{} // gone between the two reads
				continue
			}
			if err != nil {
				return fmt.Errorf("redis: snapshot of %s: %w", k, err)
			}
			addNumber(m.value, v)
		case *redis.StringSliceCmd:
			vals, err := r.Result()
			if err != nil {
				return fmt.Errorf("redis: snapshot of %s: %w", k, err)
			}
			for _, v := range vals {
				addNumber(m.value, v)
			}
			m.members.SetInt64(int64(len(vals)))
		case *redis.IntCmd:
			n, err := r.Result()
			if err != nil {
				return fmt.Errorf("redis: snapshot of %s: %w", k, err)
			}
			m.members.SetInt64(n)
		}
		out[k] = keyMeasure{m: m, expires: expires}
	}
	return nil
}

// addNumber adds v to sum when it reads as a number.
func addNumber(sum *big.Rat, v string) {
	if r, ok := new(big.Rat).SetString(strings.TrimSpace(v)); ok {
		sum.Add(sum, r)
	}
}
