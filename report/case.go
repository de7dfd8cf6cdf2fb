// Package report turns runner Results into verdicts and renders them: a
// table for people, JSON for programs, a timeline for one burst. It never
// touches a backend.
package report

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/racetest/racetest/runner"
)

// Verdict is what a run shows.
type Verdict string

const (
	// Race: some burst left more effects than allowed.
	Race Verdict = "RACE"
	// Safe: no burst exceeded the allowance, and the bursts really overlapped.
	Safe Verdict = "SAFE"
	// Inconclusive: no violation, but the attempts did not overlap enough to
	// mean anything.
	Inconclusive Verdict = "INCONCLUSIVE"
	// Failed: the run could not be carried out; nothing is claimed.
	Failed Verdict = "ERROR"
)

// Expect is what the user (or the catalog) expects of a run.
type Expect struct {
	// Kind is "safe", "race" or "max" (at most Max effects per burst).
	Kind string
	Max  int
}

// ParseExpect reads "safe", "race" or "max=N".
func ParseExpect(s string) (Expect, error) {
	switch {
	case s == "safe" || s == "race":
		return Expect{Kind: s}, nil
	case strings.HasPrefix(s, "max="):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "max="))
		if err != nil || n < 1 {
			return Expect{}, fmt.Errorf("expectation %q: max=N needs a whole number N of at least 1", s)
		}
		return Expect{Kind: "max", Max: n}, nil
	}
	return Expect{}, fmt.Errorf("unknown expectation %q (want safe, race or max=N)", s)
}

func (e Expect) String() string {
	if e.Kind == "max" {
		return "max=" + strconv.Itoa(e.Max)
	}
	if e.Kind == "" {
		return "safe"
	}
	return e.Kind
}

// Case is one scenario × backend run with what was expected of it.
type Case struct {
	Name     string // display name, e.g. "memory-set (3 replicas)"
	Scenario string
	Backend  string
	Lesson   string
	Expect   Expect
	// Strict makes INCONCLUSIVE fail the expectation.
	Strict bool
	// Settings are the run's knobs worth showing (gap, latency, isolation…).
	Settings map[string]string
	Release  string
	// Prove, when set, is the violation rate a SAFE run must bound at 95%;
	// a run whose overlapping bursts were too few to bound it is INCONCLUSIVE.
	Prove  float64
	Result *runner.Result
	Err    error
}

// Assessment is the verdict on a case and whether it met its expectation.
type Assessment struct {
	Verdict    Verdict
	Violations int
	Bursts     int
	Overlapped int
	// Rate is Violations/Bursts; Upper is its 95% upper bound. For a SAFE
	// verdict both are computed over the overlapped bursts, the only ones
	// that could have shown a race.
	Rate, Upper float64
	Met         bool
	// Why explains an unmet expectation, an error or an inconclusive run.
	Why         string
	Interrupted bool
}

// MinOverlappedShare is the share of bursts in which at least two attempts
// must have been in flight at one instant for a run without violations to
// count as SAFE rather than INCONCLUSIVE.
const MinOverlappedShare = 0.5

// Assess decides a case's verdict and checks it against the expectation.
func Assess(c Case) (a Assessment) {
	r := c.Result
	if r != nil {
		a.Bursts = len(r.Bursts)
		a.Violations = r.Violations()
		a.Overlapped = r.Overlapped()
		a.Interrupted = r.Interrupted
	}
	interrupted := a.Interrupted || errors.Is(c.Err, context.Canceled)
	if interrupted {
		// Report what finished; the expectation is not met by a run cut short.
		a.Interrupted = true
		c.Err = nil
		defer func() {
			a.Met = false
			a.Why = "interrupted after " + plural(a.Bursts, "burst") + " of " + plural(planned(r), "planned burst")
		}()
	}
	switch {
	case c.Err != nil:
		a.Verdict, a.Why = Failed, c.Err.Error()
		return a
	case a.Bursts == 0:
		a.Verdict, a.Why = Failed, "no burst completed"
		return a
	case a.Violations > 0:
		a.Verdict = Race
		a.Rate = float64(a.Violations) / float64(a.Bursts)
		a.Upper = UpperBound(a.Violations, a.Bursts)
	case r.Attempts < 2 || float64(a.Overlapped) < MinOverlappedShare*float64(a.Bursts):
		a.Verdict = Inconclusive
		a.Upper = UpperBound(0, a.Overlapped)
		a.Why = fmt.Sprintf("only %d of %d bursts had two attempts in flight at once (need %.0f%%)",
			a.Overlapped, a.Bursts, MinOverlappedShare*100)
	default:
		a.Verdict = Safe
		a.Upper = UpperBound(0, a.Overlapped)
		if c.Prove > 0 && a.Upper > c.Prove {
			a.Verdict = Inconclusive
			a.Why = fmt.Sprintf("asked to prove a violation rate ≤%s at 95%%, but only %d of %d bursts overlapped, which proves ≤%s",
				percent(c.Prove), a.Overlapped, a.Bursts, percent(a.Upper))
		}
	}
	a.Met, a.Why = met(c, r, a)
	return a
}

func planned(r *runner.Result) int {
	if r == nil {
		return 0
	}
	return r.Planned
}

func met(c Case, r *runner.Result, a Assessment) (bool, string) {
	for _, ch := range r.Checks {
		if !ch.OK {
			return false, "check failed: " + ch.Name + ": " + ch.Detail
		}
	}
	switch c.Expect.Kind {
	case "race":
		if a.Verdict != Race {
			return false, fmt.Sprintf("expected RACE, but no burst of %d exceeded %d effect(s)", a.Bursts, r.Allowed)
		}
	case "max":
		worst := r.EffectsSummary().Max
		if worst > c.Expect.Max {
			return false, fmt.Sprintf("expected at most %d effect(s) per burst, the worst burst had %d", c.Expect.Max, worst)
		}
	default:
		switch a.Verdict {
		case Race:
			return false, fmt.Sprintf("expected SAFE, but %d of %d bursts left more than %d effect(s) (worst %d)",
				a.Violations, a.Bursts, r.Allowed, r.EffectsSummary().Max)
		case Inconclusive:
			if c.Strict {
				return false, a.Why
			}
		}
	}
	return true, a.Why
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
