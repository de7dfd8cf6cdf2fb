package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/suite"
)

// plan is one run to carry out, as runplan.Build makes it.
type plan = runplan.Run

// execute carries out plans one after the other and returns their cases.
// A run that cannot be set up becomes a case with Err; Ctrl-C stops after
// the run in flight, which reports the bursts it finished.
func execute(ctx context.Context, f *factory, plans []plan, each func(report.Case)) []report.Case {
	pr := newProgress(f.IO)
	cases := executeOn(ctx, f, pr, plans, each)
	pr.wait()
	return cases
}

// noBars draws nothing: for a caller of executeOn that draws its own
// progress (the matrix: one bar per backend, counting its cells).
var noBars = &progress{}

// executeOn is execute drawing each run's bar on pr, or none on noBars.
func executeOn(ctx context.Context, f *factory, pr *progress, plans []plan, each func(report.Case)) []report.Case {
	cases := make([]report.Case, 0, len(plans))
	for _, p := range plans {
		if ctx.Err() != nil {
			break
		}
		c := p.Case
		end := func() {}
		if c.Scenario != suite.ScriptScenario {
			// A script makes nothing of racetest's own: nothing to leave behind.
			end = inFlight.begin(f.Registry, c.Backend, p.Params.RunID)
		}
		if spec, err := f.Registry.Scenario(c.Scenario); err == nil {
			c.Story = storyOf(spec)
		}
		target, err := p.Build(ctx, p.Params)
		if err != nil {
			c.Err = err
		} else {
			cfg := p.Config
			var done func()
			cfg.Progress, done = pr.track(printable.Line(c.Name), cfg.Bursts)
			c.Result, c.Err = runner.RunConfig(ctx, target, cfg)
			done()
			if cl, ok := target.(runner.Closer); ok {
				cl.Close()
			}
			if b, err := f.Registry.Backend(c.Backend); err == nil && cfg.Keep && c.Result != nil {
				c.Result.Notes = append(c.Result.Notes, keptNote(b, p.Params.RunID))
			}
			if p.After != nil {
				c = p.After(target, c)
			}
		}
		end()
		if p.Catalog {
			c = runplan.ResolveCatalog(f.Registry, c, p.Params)
		}
		cases = append(cases, c)
		if each != nil {
			each(c)
		}
	}
	return cases
}

// keptNote names what --keep left in b's store, and how to drop it.
func keptNote(b scenarios.Backend, runID string) string {
	if b.Kept == "" {
		return fmt.Sprintf("--keep: the %s backend keeps the run's state in this process: it is gone when racetest exits", b.Name)
	}
	return fmt.Sprintf("--keep: kept the %s named racetest_%s_* on %s; drop them with 'racetest clean --backend %s --run-id %s'",
		b.Kept, runID, b.Name, b.Name, runID)
}

// inFlight are the runs under way on server backends, so that a second
// Ctrl-C can say what may be left behind.
var inFlight = &runs{ids: map[string]inFlightRun{}}

type runs struct {
	mu  sync.Mutex
	ids map[string]inFlightRun // by run id
}

// inFlightRun is where a run under way makes its objects.
type inFlightRun struct {
	backend string
	kept    string // what it makes there ("tables")
	flag    string // the flag that names its server ("--postgres-url"), for 'clean'
}

// connFlag is the flag that names backend's server ("--postgres-url"), or
// "" for a backend without a server.
func connFlag(reg *scenarios.Registry, backend string) string {
	if b, err := reg.Backend(backend); err == nil && b.Conn != nil {
		return "--" + b.Conn.Flag
	}
	return ""
}

// begin records a run on backend until the returned func is called: a run
// on a backend that keeps objects on its server (Backend.Kept).
func (r *runs) begin(reg *scenarios.Registry, backend, runID string) (end func()) {
	b, err := reg.Backend(backend)
	if err != nil || b.Kept == "" || runID == "" {
		return func() {}
	}
	r.mu.Lock()
	r.ids[runID] = inFlightRun{backend: backend, kept: b.Kept, flag: connFlag(reg, backend)}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.ids, runID)
		r.mu.Unlock()
	}
}

// leftovers says what runs under way may leave, and how to remove it.
func (r *runs) leftovers() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) == 0 {
		return "No run was under way on a server: nothing is left behind."
	}
	ids := make([]string, 0, len(r.ids))
	for id := range r.ids {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		run := r.ids[id]
		with := ""
		if run.flag != "" {
			with = fmt.Sprintf(" (with the run's %s, if it gave one)", run.flag)
		}
		fmt.Fprintf(&b, "\n  the %s named racetest_%s_* may remain on %s: see them with 'racetest clean --backend %s --run-id %s --dry-run'%s, drop them without --dry-run",
			run.kept, id, run.backend, run.backend, id, with)
	}
	return "What the interrupted run made may remain:" + b.String()
}

// badParam returns the first case a backend refused for a parameter, as a
// usage error: a run whose only case never began reports nothing else.
func badParam(cases []report.Case) error {
	for _, c := range cases {
		var bad *scenarios.ParamError
		if errors.As(c.Err, &bad) {
			return usageError(fmt.Errorf("%s on %s: %w", c.Scenario, c.Backend, bad))
		}
	}
	return nil
}

// verdictError turns the cases' assessments into the command's error, and
// so its exit code: interrupted, then setup errors, then violated
// expectations (exit 1), then runs that failed only for want of proof
// (INCONCLUSIVE under --strict, or in a suite: exit 4). This is the one
// place a verdict becomes an exit code.
func verdictError(ctx context.Context, cases []report.Case) error {
	var setup []string
	violated, inconclusive := 0, 0
	for _, c := range cases {
		a := report.Assess(c)
		var bad *scenarios.ParamError
		// Ifs, not a switch: gremlins v0.6.0 never mutates a switch's case
		// expressions, and these are the verdict's exit code.
		if a.Interrupted { // Assess says so of a cancelled case's error too
			return context.Canceled
		}
		if errors.As(c.Err, &bad) {
			// A backend refused a parameter before the run began: bad input.
			return usageError(fmt.Errorf("%s on %s: %w", c.Scenario, c.Backend, bad))
		}
		if c.Err != nil {
			// Cases that failed alike (a server down under a matrix) say it once.
			if line := fmt.Sprintf("%s on %s: %v", c.Scenario, c.Backend, c.Err); !slices.Contains(setup, line) {
				setup = append(setup, line)
			}
			continue
		}
		if !a.Met && a.Unproven {
			inconclusive++
		} else if !a.Met {
			violated++
		}
	}
	if ctx.Err() != nil {
		return context.Canceled
	}
	if len(setup) > 0 {
		return setupError(errors.New(strings.Join(setup, "\n  ")))
	}
	if violated > 0 {
		return &exitError{code: exitViolated, err: fmt.Errorf("%d of %d runs did not meet their expectation", violated, len(cases))}
	}
	if inconclusive > 0 {
		return &exitError{code: exitInconclusive, err: fmt.Errorf("%d of %d runs were inconclusive: nothing was proven, and --expect safe (or --strict) fails that", inconclusive, len(cases))}
	}
	return nil
}

// strictHint says once, on stderr, that an INCONCLUSIVE run met its
// expectation and exits 0 (no --expect given, or --allow-inconclusive):
// a CI job that only reads the exit code must not mistake "nothing was
// proven" for a pass.
func strictHint(w io.Writer, cases []report.Case) {
	for _, c := range cases {
		if a := report.Assess(c); a.Verdict == report.Inconclusive && a.Met {
			fmt.Fprintln(w, "racetest: INCONCLUSIVE proves nothing but exits 0; --expect safe (without --allow-inconclusive) or --strict makes it fail (exit 4)")
			return
		}
	}
}
