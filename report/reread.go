package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/racetest/racetest/runner"
)

// ReadDocument reads a JSON report written by JSON, as 'racetest report'
// does to render it again in another format.
func ReadDocument(r io.Reader) (Document, error) {
	var d Document
	dec := json.NewDecoder(r)
	if err := dec.Decode(&d); err != nil {
		return Document{}, fmt.Errorf("not a racetest JSON report: %w", err)
	}
	if d.Schema == "" {
		return Document{}, fmt.Errorf("not a racetest JSON report: it has no \"schema\" (racetest writes %q)", SchemaVersion)
	}
	if d.Schema != SchemaVersion {
		wrote := "the racetest that wrote it"
		if d.Version != "" {
			wrote = "racetest " + d.Version + ", which wrote it"
		}
		return Document{}, fmt.Errorf("schema %q is not %q, the one this racetest reads: render it with %s",
			d.Schema, SchemaVersion, wrote)
	}
	return d, nil
}

// Cases rebuilds the cases a document was written from, so that every
// reporter renders a saved report as it rendered the run. The verdicts are
// assessed again from the bursts' figures; a run recorded without them
// (before per_burst existed) cannot be rebuilt and is an error.
func (d Document) Cases() ([]Case, error) {
	cases := make([]Case, 0, len(d.Runs))
	for i, j := range d.Runs {
		c, err := j.toCase(d.Version)
		if err != nil {
			return nil, fmt.Errorf("run %d (%s on %s): %w", i+1, j.Name, j.Backend, err)
		}
		cases = append(cases, c)
	}
	return cases, nil
}

func (j RunJSON) toCase(version string) (Case, error) {
	expect, err := ParseExpect(j.Expect)
	if err != nil {
		return Case{}, err
	}
	c := Case{
		Name: j.Name, Scenario: j.Scenario, Backend: j.Backend, Lesson: j.Lesson, Expect: expect,
		Strict: j.Strict, ProveSafe: j.ProveSafe, Settings: j.Settings, Release: j.Release, Prove: j.Prove, Story: j.Story, Command: j.Command,
	}
	if j.Error != "" {
		c.Err = errors.New(j.Error)
	}
	if j.Attempts == 0 && len(j.PerBurst) == 0 {
		// Nothing ran: the run never had a result. One interrupted before
		// it had (Ctrl-C while it connected) wrote its error, which wraps
		// context.Canceled; read as a plain error it became a setup
		// failure (exit 3), where the run said interrupted.
		if j.Interrupted {
			c.Err = interruptedError{c.Err}
		}
		return c, nil
	}
	if len(j.PerBurst) != j.Bursts {
		return Case{}, fmt.Errorf("the report has %d bursts but the figures of %d (written by racetest %s, before reports carried every burst): run it again to render it",
			j.Bursts, len(j.PerBurst), version)
	}
	if err := j.checkCounts(); err != nil {
		return Case{}, err
	}
	timeout, err := durationOf("timeout_ms", j.TimeoutMillis*1e3)
	if err != nil {
		return Case{}, err
	}
	elapsed, err := durationOf("elapsed_ms", j.ElapsedMillis*1e3)
	if err != nil {
		return Case{}, err
	}
	r := &runner.Result{
		Attempts: j.Attempts, Replicas: j.Replicas, Waves: j.Waves, Deploy: j.Deploy, Allowed: j.Allowed, Required: j.Required,
		Diagnosis: j.Diagnosis, Timeout: timeout,
		Accounting: j.Accounting, Baselined: j.Baselined, Uncounted: j.Uncounted, Invariants: j.Invariants,
		Planned: j.PlannedBursts, Errors: j.Errors, Server: j.Server, Notes: j.Notes, Checks: j.Checks,
		Interrupted: j.Interrupted, Stopped: j.StoppedEarly, Release: j.Release, ServerProbe: j.ServerProbe,
		Elapsed: elapsed,
	}
	if r.Errors == nil {
		r.Errors = map[string]int{}
	}
	r.Twins = j.Twins.twins()
	if j.CleanupError != "" {
		r.CleanupErr = errors.New(j.CleanupError)
	}
	for _, bj := range j.PerBurst {
		spread, err := durationOf("spread_us", bj.Spread)
		if err != nil {
			return Case{}, fmt.Errorf("burst %d: %w", bj.Index, err)
		}
		took, err := durationOf("duration_us", bj.Duration)
		if err != nil {
			return Case{}, fmt.Errorf("burst %d: %w", bj.Index, err)
		}
		b := runner.Burst{Index: bj.Index, Effects: bj.Effects, Allowed: bj.Allowed, Required: bj.Required, Before: bj.Before, Broken: bj.Broken, Overlap: bj.Overlap,
			Unjudged: bj.Unjudged, Unobserved: bj.Unobserved, Spread: spread, Duration: took, Retries: bj.Retries, ServerParallelism: bj.ServerParallelism,
			LockWaited: bj.LockWaited, Hold: bj.Hold}
		for name, n := range bj.Outcomes {
			cl, err := classOf(name)
			if err != nil {
				return Case{}, fmt.Errorf("burst %d: %w", bj.Index, err)
			}
			b.Outcomes[cl] = n
		}
		if bj.Wire != nil {
			b.Wire = runner.WireCounts{Held: bj.Wire.Held, Late: bj.Wire.Late, Silent: bj.Wire.Silent}
		}
		if b.Twin, err = bj.Twin.twin(); err != nil {
			return Case{}, fmt.Errorf("burst %d: %w", bj.Index, err)
		}
		r.Bursts = append(r.Bursts, b)
	}
	if t := j.Example; t != nil {
		tr := &runner.Trace{Burst: t.Burst, Effects: t.Effects, Allowed: t.Allowed, Twin: t.Twin}
		for _, wj := range t.Workers {
			cl, err := classOf(wj.Outcome)
			if err != nil {
				return Case{}, fmt.Errorf("example burst, worker %d: %w", wj.Worker, err)
			}
			wt := runner.WorkerTrace{Worker: wj.Worker, Replica: wj.Replica, Wave: wj.Wave, Outcome: cl, Err: wj.Error}
			for _, m := range wj.Marks {
				wt.Marks = append(wt.Marks, runner.Mark{Name: m.Name, At: fromMicros(m.At)})
			}
			tr.Workers = append(tr.Workers, wt)
		}
		r.Example = tr
	}
	c.Result = r
	return c, nil
}

// interruptedError is the error a run interrupted before it had a result
// recorded: its text as written, and context.Canceled as Assess reads it.
type interruptedError struct{ err error }

func (e interruptedError) Error() string {
	if e.err == nil {
		return context.Canceled.Error()
	}
	return e.err.Error()
}

func (e interruptedError) Unwrap() error { return context.Canceled }

func classOf(name string) (runner.Class, error) {
	for _, cl := range runner.Classes() {
		if cl.String() == name {
			return cl, nil
		}
	}
	return 0, fmt.Errorf("unknown outcome %q", name)
}

// maxCount bounds every count a read report may hold: far more attempts,
// bursts or effects than a run makes, and far enough from the ints' limits
// that the HTML histograms' arithmetic on them cannot overflow.
const maxCount = 1 << 40

// checkCounts refuses the counts racetest never writes: a negative count of
// attempts, bursts, attempts in flight or outcomes (the HTML histograms
// indexed their bars by them, and a negative overlap panicked: found by
// FuzzReadDocument), or one past maxCount. Effects and the read before a
// burst are a store's figures, and may be below zero.
func (j RunJSON) checkCounts() error {
	type field struct {
		name   string
		n      int
		signed bool
	}
	check := func(where string, fs ...field) error {
		for _, f := range fs {
			if f.n > maxCount || f.n < -maxCount || !f.signed && f.n < 0 {
				return fmt.Errorf("%s%s is %d, which racetest never writes: the file was edited, or not written by racetest; run the case again for a report to render",
					where, f.name, f.n)
			}
		}
		return nil
	}
	if err := check("", field{"attempts_per_burst", j.Attempts, false}, field{"bursts", j.Bursts, false},
		field{"planned_bursts", j.PlannedBursts, false}, field{"replicas", j.Replicas, false}, field{"waves", j.Waves, false},
		field{"allowed", j.Allowed, false}, field{"required", j.Required, false}); err != nil {
		return err
	}
	for _, b := range j.PerBurst {
		where := fmt.Sprintf("burst %d: ", b.Index)
		fs := []field{{"effects", b.Effects, true}, {"before", b.Before, true}, {"allowed", b.Allowed, false},
			{"required", b.Required, false}, {"overlap", b.Overlap, false}, {"retries", b.Retries, false}}
		for _, name := range slices.Sorted(maps.Keys(b.Outcomes)) {
			fs = append(fs, field{"outcomes." + name, b.Outcomes[name], false})
		}
		for i, n := range b.Broken {
			fs = append(fs, field{fmt.Sprintf("broken[%d]", i), n, false})
		}
		if w := b.Wire; w != nil {
			fs = append(fs, field{"wire.held", w.Held, false}, field{"wire.late", w.Late, false}, field{"wire.silent", w.Silent, false})
		}
		if err := check(where, fs...); err != nil {
			return err
		}
	}
	return nil
}

// maxMicros is 2^63 ns in microseconds: a time.Duration holds any duration
// below it (float64 rounds MaxInt64 up to 2^63, which would wrap).
const maxMicros = float64(math.MaxInt64) / 1e3

// durationOf reads a recorded duration: racetest never writes a negative
// one, nor one a time.Duration cannot hold (the conversion would wrap to a
// negative), and a histogram indexed by a negative spread panicked
// (found by FuzzReadDocument).
func durationOf(field string, us float64) (time.Duration, error) {
	if us < 0 || us >= maxMicros {
		return 0, fmt.Errorf("%s is %g µs, which racetest never writes: the file was edited, or not written by racetest; run the case again for a report to render", field, us)
	}
	return fromMicros(us), nil
}

// fromMicros is the inverse of micros, to the nanosecond the JSON kept.
func fromMicros(us float64) time.Duration {
	return time.Duration(math.Round(us * 1e3))
}
