package cmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
	"github.com/spf13/cobra"
)

// runOptions are the parsed flags of 'racetest run' and its dependencies.
type runOptions struct {
	*factory
	Scenario string
	Backend  string
	finishFlags
	Shape shapeFlags
	// Processes runs each replica as a 'racetest serve' process (see serve.go).
	Processes bool
	// RestartBetween restarts the replicas between two waves: --waves 2 --deploy.
	RestartBetween bool
	// Release is how the attempts leave the client: gate or last-byte.
	Release string
}

// newCmdRun builds 'racetest run'. Tests pass runF to capture the options.
func newCmdRun(f *factory, runF func(context.Context, *runOptions) error) *cobra.Command {
	opts := &runOptions{factory: f}
	c := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Fire bursts of simultaneous attempts at one scenario and report what really ran",
		Example: `  racetest run check-then-write
  racetest run memory-set --replicas 3
  racetest run conditional-update --backend postgres -n 32 --bursts 500
  racetest run check-then-write --expect race --format json
  racetest run check-then-write --backend redis -n 2 --release last-byte`,
		Args:              oneScenario("run"),
		ValidArgsFunction: completeScenario(f.Registry),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Scenario = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRun(c.Context(), opts)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&opts.Backend, "backend", "b", "memory", backendHelp(f.Registry))
	opts.finishFlags.register(fs, "what the run must show: safe, race, lost, max=N, range=MIN-MAX effects per burst, or catalog (the catalog's expectation for this backend, isolation, variant and server)",
		"draw the example burst of a RACE as a timeline (table format)")
	opts.Shape.register(fs, f.Registry, verbShape{fires: firesScenario, attempts: 16, bursts: 100})
	fs.BoolVar(&opts.Processes, "processes", false, "run each replica as a real 'racetest serve' process; attempts reach them over HTTP, round-robin")
	fs.BoolVar(&opts.RestartBetween, "restart-between", false, "restart the replicas between two waves at the same subject (a deploy): --waves 2 --deploy")
	fs.StringVar(&opts.Release, "release", string(release.Default), releaseHelp(f.Registry))
	completeEnums(c, f.Registry)
	return c
}

func runRun(ctx context.Context, o *runOptions) error {
	spec, err := scenarioOn(o.Registry, o.Scenario, o.Backend)
	if err != nil {
		return err
	}
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	catalog := o.Expect == "catalog"
	expect, err := report.ParseExpect(o.Expect)
	if errors.Is(err, report.ErrUnknownExpectation) && !catalog {
		return usageErrorf("unknown expectation %q (want safe, race, lost, max=N, range=MIN-MAX, or catalog: the catalog's expectation for this backend)", o.Expect)
	}
	if err != nil && !catalog {
		return usageError(err)
	}
	// The run's own shape: the parsed flags stay as they were given.
	sh := o.Shape
	sh.Variant = variantOf(spec, sh.Variant)
	if o.RestartBetween {
		sh.Deploy, sh.Waves = true, max(sh.Waves, 2)
	}
	if err := sh.validate(o.Registry, o.Backend); err != nil {
		return err
	}
	if err := o.Shape.checkEngine(o.Registry, o.Backend); err != nil {
		return err
	}
	if err := sh.auto(o.Backend); err != nil {
		return err
	}
	if sh.SoloEvery > 0 {
		if why := memstore.AutoRefusal(spec.Name); why != "" {
			return usageErrorf("%s", why)
		}
		if o.Processes {
			return usageErrorf("--effects auto measures the embedded store in this process; with --processes each replica's store is its own: leave out one of the two")
		}
	}
	req := runplan.Request{
		Scenario: spec.Name, Backend: o.Backend, Shape: sh.plan(sh.Replicas),
		Release: cmp.Or(o.Release, string(release.Default)), Expect: expect, Catalog: catalog, Strict: o.Strict, ProveSafe: o.proveSafe(),
	}
	if o.Processes {
		req.ReleaseOn = release.Processes
	}
	pl, err := runplan.Build(o.Registry, req)
	if fe := new(runplan.FieldError); errors.As(err, &fe) && fe.Field == "release" {
		return usageError(fmt.Errorf("--release: %w", err))
	}
	if err != nil {
		return usageError(err)
	}
	if pl.Warning != "" {
		fmt.Fprintln(o.IO.ErrOut, "racetest: warning: "+pl.Warning)
	}
	if o.Processes {
		if pl, err = processPlan(o, spec, sh, pl); err != nil {
			return err
		}
	}
	cases := execute(ctx, o.factory, []plan{pl}, nil)
	if err := badParam(cases); err != nil {
		return err
	}
	if err := nothingRan(o.Format, cases); err != nil {
		return err
	}
	return finish(ctx, o.IO, reporter, cases, reportOptions(o.IO, report.Options{
		Timeline: o.Timeline, Version: version(), Title: pageTitle(o.Format, "racetest run "+spec.Name+" on "+o.Backend),
	}))
}

// scenarioOn is the catalog's scenario for a command that fires it on
// backend; an unknown scenario, or one the backend lacks, is bad input.
func scenarioOn(reg *scenarios.Registry, scenario, backend string) (scenarios.Spec, error) {
	spec, err := reg.Scenario(scenario)
	if err != nil {
		return spec, usageError(err)
	}
	if _, err := reg.Factory(spec.Name, backend); err != nil {
		return spec, usageError(err)
	}
	return spec, nil
}

// variantOf is the variant a scenario runs when none is named: its
// first demonstration's, so that the report (and its Reproduce line) says
// which one ran.
func variantOf(spec scenarios.Spec, variant string) string {
	if variant == "" && len(spec.Demo) > 0 {
		return spec.Demo[0].Variant
	}
	return variant
}

// pageTitle is the title of a single run's report where it has room for
// one (a page); the table's row says it already.
func pageTitle(format, title string) string {
	if format != "html" {
		return ""
	}
	return title
}

// scenarioNames lists the catalog's scenario names.
func scenarioNames(r *scenarios.Registry) []string {
	var names []string
	for _, s := range r.Scenarios() {
		names = append(names, s.Name)
	}
	return names
}
