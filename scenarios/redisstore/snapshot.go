package redisstore

import (
	"context"
	"fmt"
	"math/big"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/runner"
)

// MaxSnapshotKeys is the most keys a --effects auto snapshot reads.
const MaxSnapshotKeys = 100_000

// maxSnapshotKeys is the limit a run applies (tests lower it).
var maxSnapshotKeys = MaxSnapshotKeys

// Snapshot measures the keys under each pattern for --effects auto: how
// many there are ("PATTERN rows"), the sum of the numeric values of its
// strings and hash fields ("PATTERN.value"), and the members of its sets,
// lists, sorted sets and hashes ("PATTERN.members"). A key is read once,
// under the first pattern that matches it.
func Snapshot(ctx context.Context, c redis.Cmdable, patterns []string) (runner.Snapshot, error) {
	if len(patterns) == 0 {
		return nil, &runner.SnapshotError{Msg: "--effects auto on Redis measures the keys --watch names: add --watch 'PATTERN,…' (e.g. --watch 'coupon:*,redeemed:*')"}
	}
	s := runner.Snapshot{}
	seen := map[string]bool{}
	for _, p := range patterns {
		rows, value, members := new(big.Rat), new(big.Rat), new(big.Rat)
		var keys []string
		iter := c.Scan(ctx, 0, p, 1000).Iterator()
		for iter.Next(ctx) {
			if k := iter.Val(); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
			if len(seen) > maxSnapshotKeys {
				return nil, &runner.SnapshotError{Msg: fmt.Sprintf("--watch %s: more than %d keys to read per burst — narrow the pattern to the keys the attempt writes ({{.RunID}} is the run's id), or count the effects with --effects COMMAND", p, maxSnapshotKeys)}
			}
		}
		if err := iter.Err(); err != nil {
			return nil, fmt.Errorf("redis: snapshot of %s: %w", p, err)
		}
		rows.SetInt64(int64(len(keys)))
		for _, k := range keys {
			if err := measureKey(ctx, c, k, value, members); err != nil {
				return nil, fmt.Errorf("redis: snapshot of %s: %w", k, err)
			}
		}
		s[p+runner.RowsSuffix], s[p+".value"], s[p+".members"] = rows, value, members
	}
	return s, nil
}

func measureKey(ctx context.Context, c redis.Cmdable, k string, value, members *big.Rat) error {
	typ, err := c.Type(ctx, k).Result()
	if err != nil {
		return err
	}
	var n int64
	switch typ {
	case "string":
		v, err := c.Get(ctx, k).Result()
		if err == redis.Nil {
			return nil
		}
		if err != nil {
			return err
		}
		addNumber(value, v)
		return nil
	case "hash":
		vals, err := c.HVals(ctx, k).Result()
		if err != nil {
			return err
		}
		for _, v := range vals {
			addNumber(value, v)
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
		return err
	}
	members.Add(members, new(big.Rat).SetInt64(n))
	return nil
}

// addNumber adds v to sum when it reads as a number.
func addNumber(sum *big.Rat, v string) {
	if r, ok := new(big.Rat).SetString(strings.TrimSpace(v)); ok {
		sum.Add(sum, r)
	}
}
