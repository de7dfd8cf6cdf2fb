package explore

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Orders counts the interleavings of n attempts of k steps each: the
// multinomial (n·k)! / (k!)^n — C(k+m, k) for two attempts of k and m.
// It saturates at limit+1 so that a huge count never overflows.
func Orders(n, k int) *big.Int {
	total := big.NewInt(1)
	placed := 0
	for range n {
		total.Mul(total, new(big.Int).Binomial(int64(placed+k), int64(k)))
		placed += k
	}
	return total
}

// Independent says whether step i (0-based) of one attempt and step j of
// another commute: swapping them, adjacent, cannot change what either sees
// or what the store ends with (two plain reads).
type Independent func(i, j int) bool

// enumerate calls visit with every interleaving of n attempts of k steps
// each, in lexicographic order, skipping those that differ from a kept one
// only by swapping adjacent independent steps (a later attempt's step just
// before an earlier attempt's independent step). visit returns false to
// stop. It returns how many it skipped.
func enumerate(n, k int, indep Independent, visit func(seq []int) bool) (pruned int) {
	seq := make([]int, 0, n*k)
	done := make([]int, n)
	var rec func() bool
	rec = func() bool {
		if len(seq) == n*k {
			return visit(append([]int(nil), seq...))
		}
		for w := range n {
			if done[w] == k {
				continue
			}
			if indep != nil && len(seq) > 0 {
				p := seq[len(seq)-1]
				// The previous step is a later attempt's, and it commutes
				// with this one: the order with the two swapped is kept.
				if p > w && indep(done[p]-1, done[w]) {
					pruned += countRest(n, k, done, w)
					continue
				}
			}
			seq = append(seq, w)
			done[w]++
			ok := rec()
			done[w]--
			seq = seq[:len(seq)-1]
			if !ok {
				return false
			}
		}
		return true
	}
	rec()
	return pruned
}

// countRest counts the completions of a prefix (done steps per attempt)
// after one more step of w.
func countRest(n, k int, done []int, w int) int {
	rem := make([]int, n)
	total := 0
	for i := range n {
		rem[i] = k - done[i]
		if i == w {
			rem[i]--
		}
		total += rem[i]
	}
	c := big.NewInt(1)
	placed := 0
	for _, r := range rem {
		placed += r
		c.Mul(c, new(big.Int).Binomial(int64(placed), int64(r)))
	}
	if !c.IsInt64() || c.Int64() > 1<<40 {
		return 1 << 40
	}
	return int(c.Int64())
}

// Letter names attempt i as a schedule does: A, B, C.
func Letter(i int) string { return string(rune('A' + i)) }

// Format writes seq as a schedule: "A1 B1 A2 B2".
func Format(seq []int) string {
	count := map[int]int{}
	parts := make([]string, len(seq))
	for i, w := range seq {
		count[w]++
		parts[i] = Letter(w) + strconv.Itoa(count[w])
	}
	return strings.Join(parts, " ")
}

// ParseSchedule reads a schedule ("A1 B1 A2 B2") for attempts attempts:
// each attempt's steps numbered from 1, in order.
func ParseSchedule(s string, attempts int) ([]int, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '→' })
	if len(fields) == 0 {
		return nil, fmt.Errorf(`--schedule is empty: name the steps in order, e.g. "A1 B1 A2 B2"`)
	}
	next := make([]int, attempts)
	seq := make([]int, 0, len(fields))
	for _, f := range fields {
		if len(f) < 2 {
			return nil, fmt.Errorf(`--schedule: %q is not a step: write an attempt's letter and its step number, e.g. "A1 B1 A2 B2"`, f)
		}
		w := int(strings.ToUpper(f[:1])[0]) - 'A'
		if w < 0 || w >= attempts {
			return nil, fmt.Errorf("--schedule: %q names attempt %s, but there are %d attempts (A..%s): set --attempts",
				f, strings.ToUpper(f[:1]), attempts, Letter(attempts-1))
		}
		n, err := strconv.Atoi(f[1:])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--schedule: %q: the step number after the letter must be a whole number from 1", f)
		}
		if n != next[w]+1 {
			return nil, fmt.Errorf("--schedule: %q comes out of turn: attempt %s's steps run in their own order, so its next step is %s%d",
				f, Letter(w), Letter(w), next[w]+1)
		}
		next[w] = n
		seq = append(seq, w)
	}
	return seq, nil
}
