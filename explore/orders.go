package explore

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Orders counts the interleavings of n attempts of k steps each: the
// multinomial (n·k)! / (k!)^n — C(k+m, k) for two attempts of k and m.
func Orders(n, k int) *big.Int {
	ks := make([]int, n)
	for i := range ks {
		ks[i] = k
	}
	return Interleavings(ks)
}

// Interleavings counts the orders of attempts of ks[i] steps each, each
// attempt's steps in their own order: (Σk)! / Π(k!) — C(7,2) = 21 for
// attempts of 2 and 5 steps.
func Interleavings(ks []int) *big.Int {
	total := big.NewInt(1)
	placed := 0
	for _, k := range ks {
		placed += k
		total.Mul(total, new(big.Int).Binomial(int64(placed), int64(k)))
	}
	return total
}

// StepRef names one step of one attempt: what an independence relation
// judges.
type StepRef struct {
	Attempt int    // 0 = A
	Index   int    // the attempt's step, from 0
	Name    string // its mark, as the attempt took it when it ran first
	// Before are the attempt's steps before this one, as it took them
	// when it ran first: the transaction a COMMIT ends (ByAccess).
	Before []string
}

// Independent says whether two steps of different attempts commute:
// whichever runs first, neither sees anything different and the store
// ends the same (two plain reads; steps on different rows or keys). It
// must judge the two steps themselves — each as its own attempt takes
// it — never one attempt's step for another's.
type Independent func(a, b StepRef) bool

// enumerate calls visit with every interleaving of attempts of ks[i] steps
// in lexicographic order, leaving out every order that is not the least,
// lexicographically, of the orders reachable from it by swapping adjacent
// independent steps (Anisimov and Knuth's normal form of a trace). Those
// orders run the same steps in the same order wherever it matters, so
// each class of equivalent orders is visited exactly once: the reduction
// is sound for every independence relation that only pairs steps which
// truly commute. visit returns false to stop. It returns how many it left
// out (saturating at 1<<40).
func enumerate(ks []int, indep func(a, i, b, j int) bool, visit func(seq []int) bool) (pruned int) {
	n, total := len(ks), 0
	for _, k := range ks {
		total += k
	}
	seq := make([]int, 0, total)
	at := make([]int, 0, total) // the attempt's step index at each position
	done := make([]int, n)
	// normal reports whether appending w's next step keeps seq in normal
	// form: no earlier step of a later attempt that this step commutes
	// with, and with every step after it.
	normal := func(w int) bool {
		if indep == nil {
			return true
		}
		for q := len(seq) - 1; q >= 0; q-- {
			p := seq[q]
			if p == w || !indep(p, at[q], w, done[w]) {
				return true
			}
			if p > w {
				return false
			}
		}
		return true
	}
	var rec func() bool
	rec = func() bool {
		if len(seq) == total {
			return visit(append([]int(nil), seq...))
		}
		for w := range n {
			if done[w] == ks[w] {
				continue
			}
			if !normal(w) {
				pruned = min(pruned+countRest(ks, done, w), 1<<40)
				continue
			}
			seq, at = append(seq, w), append(at, done[w])
			done[w]++
			ok := rec()
			done[w]--
			seq, at = seq[:len(seq)-1], at[:len(at)-1]
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
func countRest(ks []int, done []int, w int) int {
	rem := make([]int, len(ks))
	for i := range ks {
		rem[i] = ks[i] - done[i]
		if i == w {
			rem[i]--
		}
	}
	c := Interleavings(rem)
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
