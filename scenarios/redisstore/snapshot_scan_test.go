package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// Several patterns share one scan of the keyspace, matched in the client
// as Redis matches them: each pattern's figures are what SCAN MATCH of it
// alone finds, a key counted under the first pattern that matches it, a
// pattern without a wildcard read as its key.
func TestSnapshotPatternsAsRedisMatchesThem(t *testing.T) {
	rdb, prefix := testenv.OwnRedis(t)
	ctx := context.Background()
	keys := []string{"a", "b", "ab", "a*", "a?", "[x]", "x", "y", "z-1", "z-9", "z^", `back\slash`, "lit", "aa:1", "aa:22"}
	for i, k := range keys {
		if err := rdb.Set(ctx, prefix+":"+k, i+1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	patterns := []string{"*", "a*", "?", "a?", `a\*`, `a\?`, "[ab]", "[^ab]", "[a-c]b", "z-[0-5]", `\[x\]`, `back\\slash`, "lit", "aa:??", "[x", `z\^`, "[]]"}
	for _, pt := range patterns {
		p := prefix + ":" + pt
		// Redis's own answer, SCAN MATCH of the pattern alone.
		var want []string
		iter := rdb.Scan(ctx, 0, p, 1000).Iterator()
		for iter.Next(ctx) {
			want = append(want, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, k := range want {
			n, _ := rdb.Get(ctx, k).Int()
			sum += n
		}
		// The snapshot's, with a second pattern beside it (one shared
		// scan, matched in the client) that matches none of the keys.
		got, err := redisstore.Snapshot(ctx, rdb, []string{p, prefix + ":nothing*"})
		if err != nil {
			t.Fatal(err)
		}
		if rows := got[p+runner.RowsSuffix]; rows.RatString() != fmt.Sprint(len(want)) || got[p+".value"].RatString() != fmt.Sprint(sum) {
			t.Errorf("pattern %q: %s rows, value %s; SCAN MATCH finds %d keys %v, value %d", pt, rows.RatString(), got[p+".value"].RatString(), len(want), want, sum)
		}
	}
	// A key is counted under the first pattern that matches it.
	got, err := redisstore.Snapshot(ctx, rdb, []string{prefix + ":a*", prefix + ":*", prefix + ":lit"})
	if err != nil {
		t.Fatal(err)
	}
	first := 0
	for _, k := range keys {
		if len(k) > 0 && k[0] == 'a' {
			first++
		}
	}
	if a, all, lit := got[prefix+":a*"+runner.RowsSuffix], got[prefix+":*"+runner.RowsSuffix], got[prefix+":lit"+runner.RowsSuffix]; a.RatString() != fmt.Sprint(first) || all.RatString() != fmt.Sprint(len(keys)-first) || lit.Sign() != 0 {
		t.Errorf("first match: a* %s (want %d), * %s (want %d), lit %s (want 0, counted under *)", a.RatString(), first, all.RatString(), len(keys)-first, lit.RatString())
	}
	if !slices.Contains(keys, "lit") {
		t.Fatal("the literal key is not among the keys")
	}
}

// BenchmarkSnapshotKeys: 10,000 watched keys (strings, hashes and sets)
// among 100,000 in the database, under three patterns, measured once per
// iteration; issue 43 asks for under 1 s a snapshot. The keys are the
// benchmark's own, removed after.
//
//	go test -run '^$' -bench SnapshotKeys -benchtime 5x ./scenarios/redisstore/
func BenchmarkSnapshotKeys(b *testing.B) {
	rdb, prefix := testenv.OwnRedis(b)
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for i := range 100_000 {
		switch {
		case i%10 != 0:
			pipe.Set(ctx, fmt.Sprintf("%s:other:%d", prefix, i), i, 0)
		case i%30 == 0:
			pipe.HSet(ctx, fmt.Sprintf("%s:h:%d", prefix, i), "n", i)
		case i%30 == 10:
			pipe.SAdd(ctx, fmt.Sprintf("%s:s:%d", prefix, i), i, i+1)
		default:
			pipe.Set(ctx, fmt.Sprintf("%s:v:%d", prefix, i), i, 0)
		}
		if i%5000 == 4999 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	patterns := []string{prefix + ":v:*", prefix + ":h:*", prefix + ":s:*"}
	var s redisstore.Snapshotter
	b.ResetTimer()
	for b.Loop() {
		snap, err := s.Snapshot(ctx, rdb, patterns)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, p := range patterns {
			v, _ := snap[p+runner.RowsSuffix].Float64()
			n += int(v)
		}
		if n != 10_000 {
			b.Fatalf("%d keys measured, want 10,000", n)
		}
	}
}
