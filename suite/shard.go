package suite

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Shard is one of N parts of a suite, for CI's parallel jobs (a GitHub
// Actions matrix, GitLab's parallel:): 'racetest suite FILE --shard K/N'
// runs part K. Zero is the whole suite.
//
// A case's part is decided by its name alone (and, for cases that share
// a name, by which of them it is), hashed: adding, removing or moving
// other cases never moves it to another part, so a shard's history in CI
// stays comparable. The price is balance: parts differ in size by chance,
// as test runners that shard by name accept too.
type Shard struct {
	K, N int
}

// ParseShard reads "K/N": part K (from 1) of N.
func ParseShard(s string) (Shard, error) {
	ks, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	k, kerr := strconv.Atoi(ks)
	n, nerr := strconv.Atoi(ns)
	if !ok || kerr != nil || nerr != nil {
		return Shard{}, fmt.Errorf("--shard %q: give K/N, part K of N (e.g. 2/3)", s)
	}
	if n < 1 || k < 1 || k > n {
		return Shard{}, fmt.Errorf("--shard %q: K must be from 1 to N, and N at least 1 (e.g. 1/%d to %d/%d)", s, max(n, 1), max(n, 1), max(n, 1))
	}
	return Shard{K: k, N: n}, nil
}

// String is "K/N", or "" for the whole suite.
func (s Shard) String() string {
	if s.N == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.K, s.N)
}

// part is the part (from 1) that the nth case (from 0) named name is in.
func (s Shard) part(name string, nth int) int {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d", name, nth)
	return int(h.Sum64()%uint64(s.N)) + 1
}

// Select returns the plans of this part, in the file's order. The zero
// Shard is the whole suite (and so is part 1 of 1: every case is in part 1).
func (s Shard) Select(plans []Plan) []Plan {
	if s.N == 0 {
		return plans
	}
	seen := map[string]int{}
	var mine []Plan
	for _, p := range plans {
		name := p.Case.Name
		nth := seen[name]
		seen[name]++
		if s.part(name, nth) == s.K {
			mine = append(mine, p)
		}
	}
	return mine
}
