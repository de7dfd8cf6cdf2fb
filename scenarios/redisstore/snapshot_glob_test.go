package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
)

// globMatch is Redis's stringmatchlen, case by case: what SCAN MATCH
// finds, the snapshot counts (the real server is compared in
// TestSnapshotPatternsAsRedisMatchesThem; these are the edges).
func TestSnapshotGlobMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true},
		{"**", "abc", true},
		{"a**", "a", true},
		{"a**b", "axxb", true},
		{"a**b", "axxc", false},
		{"a*", "a", true},
		{"*a", "ba", true},
		{"*a", "ab", false},
		{"*b*", "abc", true},
		{"*c", "", false},
		{"a*c", "ac", true},
		{"?", "", false},
		{"?", "ab", false},
		{"a?c", "abc", true},
		{"[ab]", "b", true},
		{"[ab]", "", false},
		{"[ab]", "c", false},
		{"[^ab]", "c", true},
		{"[^ab]", "a", false},
		{"[^]", "x", true},
		{"[a-c]", "b", true},
		{"[a-c]", "c", true},
		{"[a-c]", "a", true},
		{"[a-c]", "d", false},
		{"[c-a]", "b", true},
		{"[c-a]", "c", true},
		{"[c-a]", "a", true},
		{"[c-a]", "d", false},
		{`[\]]`, "]", true},
		{`[\]]x`, "]x", true},
		{`[\-]`, "-", true},
		{"[x", "x", true},
		{"[x", "y", false},
		{"[ab", "b", true},
		{"a[", "ab", false},
		{"a[", "a", false},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{`a\`, `a\`, true},
		{"abc", "abc", true},
		{"abc", "abcd", false},
		{"abcd", "abc", false},
	} {
		if got := globMatch(c.p, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.p, c.s, got, c.want)
		}
	}
	for _, c := range []struct {
		p, key  string
		literal bool
	}{
		{"coupon:1", "coupon:1", true},
		{`a\*b`, "a*b", true},
		{`a\`, `a\`, true},
		{`a\\b`, `a\b`, true},
		{"a*", "", false},
		{"a?", "", false},
		{"a[b]", "", false},
	} {
		if k, lit := literalKey(c.p); k != c.key || lit != c.literal {
			t.Errorf("literalKey(%q) = %q %v, want %q %v", c.p, k, lit, c.key, c.literal)
		}
	}
}

// The key limit counts every key the patterns reach, literal ones too:
// exactly the limit is read, one more is refused with the way out.
func TestSnapshotKeyLimit(t *testing.T) {
	rdb, prefix := testenv.OwnRedis(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := rdb.Set(ctx, prefix+":"+k, 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	defer func(n int) { maxSnapshotKeys = n }(maxSnapshotKeys)
	maxSnapshotKeys = 3
	if _, err := Snapshot(ctx, rdb, []string{prefix + ":*"}); err != nil {
		t.Errorf("3 keys at a limit of 3: %v", err)
	}
	if _, err := Snapshot(ctx, rdb, []string{prefix + ":a", prefix + ":b", prefix + ":c"}); err != nil {
		t.Errorf("3 literal keys at a limit of 3: %v", err)
	}
	maxSnapshotKeys = 2
	var se *runner.SnapshotError
	for _, patterns := range [][]string{{prefix + ":*"}, {prefix + ":a", prefix + ":b", prefix + ":c"}} {
		if _, err := Snapshot(ctx, rdb, patterns); !errors.As(err, &se) || !strings.Contains(err.Error(), "more than 2 keys to read per burst") {
			t.Errorf("%v, 3 keys at a limit of 2: %v", patterns, err)
		}
	}
}
