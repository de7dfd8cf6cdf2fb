package race

import (
	"bytes"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
)

// This file is the package's whole use of report: the verdict, and the
// table a failing test prints, come from the same code as racetest's own.

// Verdict is what a run shows: RACE, LOST, SAFE, INCONCLUSIVE or ERROR.
type Verdict = report.Verdict

// The verdicts, as report defines them.
const (
	// Race: a burst left more effects than allowed.
	Race = report.Race
	// Lost: a burst left fewer effects than required while an attempt
	// claimed it done (a user told "already paid" who was never paid).
	Lost = report.Lost
	// Safe: no burst left the allowed range, and enough bursts tested the
	// guard (the action took effect, two attempts overlapped).
	Safe = report.Safe
	// Inconclusive: too few bursts tested anything.
	Inconclusive = report.Inconclusive
	// Error: the run could not be carried out; nothing is claimed.
	Error = report.Errored
)

// expectation is what a test wants of its case.
type expectation int

const (
	wantSafe expectation = iota
	wantRace
)

// assessed is a run judged against an expectation.
type assessed struct {
	verdict    Verdict
	met        bool
	why        string
	violations int
	bursts     int
}

// DefaultBackend is the BACKEND a report shows for a Case that names none.
const DefaultBackend = "func"

func reportCase(name, backend string, res *runner.Result, err error, want expectation, strict bool) report.Case {
	if backend == "" {
		backend = DefaultBackend
	}
	c := report.Case{Name: name, Scenario: name, Backend: backend, Result: res, Err: err, Strict: strict,
		Expect: report.Expect{Kind: report.ExpectSafe}}
	if want == wantRace {
		c.Expect.Kind = report.ExpectRace
	}
	return c
}

func assess(c report.Case) assessed {
	a := report.Assess(c)
	return assessed{verdict: a.Verdict, met: a.Met, why: a.Why, violations: a.Violations, bursts: a.Bursts}
}

// table is the run as racetest prints it: the row, why an expectation
// failed, notes, errors, and the worst burst's timeline.
func table(c report.Case) string {
	var b bytes.Buffer
	_ = report.Table(&b, []report.Case{c}, report.Options{Timeline: true})
	return b.String()
}
