// Package runplan builds runs: one scenario on one backend, with a shape, a
// release mode and an expectation, made ready for the runner and for the
// report. It is the one place a run plan is made: 'racetest run', 'demo'
// and 'suite' build theirs here, and new commands that fire built-in
// scenarios (a matrix, an explorer) should too, so that a run means the
// same thing whichever command asked for it.
//
// The whole API:
//
//	r, err := runplan.Build(reg, runplan.Request{Scenario: "check-then-write", Backend: "postgres", Shape: sh, Catalog: true})
//	t, err := r.Build(ctx, r.Params) // the registry's scenario on its backend
//	// … run t with r.Config, giving a report.Case c …
//	c = runplan.ResolveCatalog(reg, c, r.Params) // when r.Catalog: the server is known now
//
// An error from Build is a *FieldError naming the part of the request it
// is about (scenario, backend, release, params), so that a command can
// point at its flag and a suite at its key.
package runplan

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// Shape is a run's knobs, with every default already applied: the one
// shape of every way of firing (run, demo, matrix, sql, redis, mongo,
// http, explore's confirmation, and a suite's cases of each kind). Each
// starts from DefaultShape and becomes the runner's configuration through
// Options, so a knob they all share is one field here, one line in
// Options (or Params), one flag in cmd/flags.go's shapeFlagTable and one
// key in suite/schema.go.
type Shape struct {
	Attempts, Bursts, Replicas, Waves int
	// Deploy restarts every replica between waves.
	Deploy bool
	// Keep leaves the run's namespaced objects in the store.
	Keep                       bool
	Gap, Latency, TTL, Timeout time.Duration
	Seed                       int64
	// Isolation, Engine, Variant and Fault are passed to the backend as given.
	Isolation, Engine, Variant, Fault string
	Conn                              scenarios.Connections
	// Retries retries an attempt the server refused with a conflict up to
	// this many times (runner.Retries); the catalog's table reads it too.
	Retries int
	// SoloEvery, above 0, judges the run by solo twins instead of the
	// scenario's own count (--effects auto; runner.Config.SoloEvery).
	SoloEvery int
}

// Params are the scenario's parameters for a run of this shape, named
// runID: the one place a shape becomes a backend's parameters.
func (sh Shape) Params(runID string) scenarios.Params {
	return scenarios.Params{
		RunID: runID, Attempts: sh.Attempts, Replicas: sh.Replicas,
		Gap: sh.Gap, Latency: sh.Latency, TTL: sh.TTL, Seed: sh.Seed,
		Isolation: sh.Isolation, Engine: sh.Engine, Variant: sh.Variant, Fault: sh.Fault, Conn: sh.Conn,
		Retries: sh.Retries,
	}
}

// DefaultShape is a run's shape before any flag or suite key changes it:
// racetest's defaults, the same for the command line and the suite.
func DefaultShape() Shape {
	return Shape{
		Attempts: runner.DefaultAttempts, Bursts: runner.DefaultBursts,
		Replicas: runner.DefaultReplicas, Waves: runner.DefaultWaves,
		Latency: scenarios.DefaultLatency, TTL: scenarios.DefaultTTL, Timeout: runner.DefaultTimeout,
	}
}

// Options are the runner's options for a run of this shape: the one place
// a shape becomes the runner's configuration. What a shape does not hold
// (the allowance, the release) the caller appends.
func (sh Shape) Options() []runner.Option {
	return []runner.Option{
		runner.Attempts(sh.Attempts), runner.Bursts(sh.Bursts), runner.Replicas(sh.Replicas),
		runner.Waves(sh.Waves), runner.Deploy(sh.Deploy),
		runner.Timeout(sh.Timeout), runner.Keep(sh.Keep), runner.Retries(sh.Retries), runner.SoloTwins(sh.SoloEvery),
	}
}

// Request is the run a command asks for.
type Request struct {
	Scenario, Backend string
	// Name is what reports call the case (default: the scenario's name).
	Name  string
	Shape Shape
	// RunID namespaces what the run creates (default: a fresh one).
	RunID string
	// Release is the release mode's name. Empty releases through the
	// default gate and leaves the report's release unnamed.
	Release string
	// ReleaseOn is what the release mode must apply to when it is not the
	// backend itself (release.Processes for replicas that are processes).
	ReleaseOn string
	// Expect is what the run must show; it is ignored when Catalog is set.
	Expect report.Expect
	// Catalog: the run must show what the catalog's table says, resolved
	// now for an unknown server, and again (ResolveCatalog) once the run
	// has named its server.
	Catalog bool
	// Strict fails an INCONCLUSIVE run.
	Strict bool
	// ProveSafe fails an INCONCLUSIVE run expected SAFE (report.Case.ProveSafe).
	ProveSafe bool
}

// Builder makes a run's target from the run's parameters.
type Builder func(ctx context.Context, p scenarios.Params) (runner.Target, error)

// Run is one run ready to carry out: the case as the report will show it
// before it ran, the scenario's parameters, the runner's shape, and how to
// build the target the runner fires at.
type Run struct {
	Case   report.Case
	Params scenarios.Params
	Config runner.Config
	// Shape is the shape the run was made from: what builds its target
	// reads a knob of it that is neither a parameter nor the runner's.
	Shape Shape
	// Build makes the target: the registry's scenario for a run Build
	// made; a script, an HTTP endpoint or a fleet of processes for runs
	// their own constructors made.
	Build Builder
	// After, when set, completes the case once its target has run, with
	// what only the run settles (the release an HTTP target chose).
	After func(t runner.Target, c report.Case) report.Case
	// Catalog: the expectation is the catalog's, to be resolved again with
	// ResolveCatalog once the run has named its server.
	Catalog bool
	// Warning, when not empty, says why the run's release mode is not the
	// one asked for (it falls back to the gate): tell the user. The run's
	// report notes it too.
	Warning string
}

// FieldError is a request Build refuses: bad input, not a failing server.
type FieldError struct {
	// Field is "scenario", "backend", "release" or "params".
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Build checks req against the catalog and makes its run. It connects to
// nothing: a backend checks its connection and its own knobs when the run
// builds the scenario.
func Build(reg *scenarios.Registry, req Request) (Run, error) {
	spec, err := reg.Scenario(req.Scenario)
	if err != nil {
		return Run{}, &FieldError{"scenario", err}
	}
	if _, err := reg.Factory(spec.Name, req.Backend); err != nil {
		return Run{}, &FieldError{"backend", err}
	}
	sh := req.Shape
	runID := req.RunID
	if runID == "" {
		runID = scenarios.NewRunID()
	}
	p := sh.Params(runID)
	if err := p.Validate(); err != nil {
		return Run{}, &FieldError{"params", err}
	}
	releaseOn := req.ReleaseOn
	if releaseOn == "" {
		releaseOn = req.Backend
	}
	// A mode that does not apply falls back to the gate; the run's notes
	// say so (Plan.Options), never silently.
	rel, err := release.New(req.Release, releaseOn)
	if err != nil {
		return Run{}, &FieldError{"release", err}
	}
	// Auto keeps the gate where holding a request back cannot line the
	// attempts up (memory-set) or was not measured (clusters).
	rel.KeepGate(spec.AutoGate())
	p.Dial = rel.Dial
	cfg := runner.NewConfig(append(append(sh.Options(), runner.Allowed(spec.Allowed)), rel.Options()...)...)
	name := req.Name
	if name == "" {
		name = spec.Name
	}
	expect := req.Expect
	if req.Catalog {
		want, _ := reg.Expect(spec.Name, req.Backend, p, "")
		expect = report.Expect{Kind: report.ExpectKind(want)}
	}
	c := report.Case{
		Name: name, Scenario: spec.Name, Backend: req.Backend, Lesson: spec.Lesson,
		Expect: expect, Strict: req.Strict, ProveSafe: req.ProveSafe, Settings: Settings(req.Backend, p, cfg),
	}
	if req.Release != "" {
		c.Release = string(rel.Mode)
	}
	return Run{Case: c, Params: p, Config: cfg, Shape: sh, Build: registryBuilder(reg, spec.Name, req.Backend),
		Catalog: req.Catalog, Warning: rel.Warning}, nil
}

// registryBuilder builds scenario on backend from the registry.
func registryBuilder(reg *scenarios.Registry, scenario, backend string) Builder {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		return reg.Build(ctx, scenario, backend, p)
	}
}

// ResolveCatalog sets a case's expectation from the catalog's table, now
// that the run has named its server, and notes why when a row of the table
// decided it (the isolation level, the variant, the server's own behaviour).
func ResolveCatalog(reg *scenarios.Registry, c report.Case, p scenarios.Params) report.Case {
	server := ""
	if c.Result != nil {
		server = c.Result.Server
	}
	e, why := reg.Expect(c.Scenario, c.Backend, p, server)
	c.Expect = report.Expect{Kind: report.ExpectKind(e)}
	if why != "" && c.Result != nil {
		r := *c.Result
		r.Notes = append(append([]string(nil), r.Notes...), report.CatalogNotePrefix+fmt.Sprintf("expects %s here: %s", strings.ToUpper(string(e)), why))
		c.Result = &r
	}
	return c
}

// Settings lists the knobs of a run that a reader of its report needs.
func Settings(backend string, p scenarios.Params, cfg runner.Config) map[string]string {
	s := map[string]string{}
	if p.Gap > 0 {
		s["gap"] = p.Gap.String()
	}
	if backend == "memory" {
		// The seed drives the embedded store's jitter; elsewhere it changes nothing.
		s["latency"] = p.Latency.String()
		s["seed"] = strconv.FormatInt(p.Seed, 10)
	}
	if cfg.Replicas > 1 {
		s["replicas"] = strconv.Itoa(cfg.Replicas)
	}
	if p.TTL != scenarios.DefaultTTL && p.TTL > 0 {
		s["ttl"] = p.TTL.String()
	}
	if cfg.Timeout != runner.DefaultTimeout {
		s["timeout"] = cfg.Timeout.String()
	}
	if cfg.Retries > 0 {
		s["retry"] = strconv.Itoa(cfg.Retries)
	}
	if cfg.SoloEvery > 0 {
		s["effects"] = "auto"
	}
	if cfg.Waves > 1 {
		s["waves"] = strconv.Itoa(cfg.Waves)
		s["deploy"] = strconv.FormatBool(cfg.Deploy)
	}
	for k, v := range map[string]string{"isolation": p.Isolation, "engine": p.Engine, "variant": p.Variant, "fault": p.Fault} {
		if v != "" {
			s[k] = v
		}
	}
	return s
}
