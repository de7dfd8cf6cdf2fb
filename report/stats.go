package report

import "math"

// Confidence is the one-sided confidence level of every bound racetest
// reports.
const Confidence = 0.95

// UpperBound is the one-sided 95% Clopper-Pearson upper bound on a rate
// of which k events were seen in n trials: the largest rate that would
// still show k or fewer events with probability 5%. For k = 0 it is
// 1 - 0.05^(1/n), close to the rule of three (3/n).
func UpperBound(k, n int) float64 {
	// Ifs, not a switch, so that gremlins mutates these (scripts/mutation.sh).
	if n <= 0 || k >= n {
		return 1
	}
	if k == 0 {
		return 1 - math.Pow(1-Confidence, 1/float64(n))
	}
	lo, hi := float64(k)/float64(n), 1.0
	for range 100 {
		mid := (lo + hi) / 2
		if binomCDF(k, n, mid) > 1-Confidence {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// BurstsFor is how many bursts without a violation prove a violation rate
// at most bound at 95% (299 for 1%). It is 0 for a bound outside (0, 1).
func BurstsFor(bound float64) int {
	if bound <= 0 || bound >= 1 {
		return 0
	}
	n := int(math.Ceil(math.Log(1-Confidence) / math.Log(1-bound)))
	// Guard the float rounding at the boundary.
	for n > 1 && UpperBound(0, n-1) <= bound {
		n--
	}
	for UpperBound(0, n) > bound {
		n++
	}
	return n
}

// binomCDF is P(X <= k) for X ~ Binomial(n, p), summed in log space.
func binomCDF(k, n int, p float64) float64 {
	lp, lq := math.Log(p), math.Log1p(-p)
	sum := 0.0
	for i := 0; i <= k; i++ {
		sum += math.Exp(lchoose(n, i) + float64(i)*lp + float64(n-i)*lq)
	}
	return sum
}

func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}
