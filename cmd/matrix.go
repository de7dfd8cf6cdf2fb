package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/cobra"
)

// MatrixOptions are the parsed flags of 'racetest matrix'.
type MatrixOptions struct {
	*Factory
	Backends   []string
	Scenarios  []string
	Variants   []string
	Isolations []string
	Format     string
	Shape      shapeFlags
}

// matrixBackends are the backends with isolation levels, as each declares
// them: the matrix's columns exist only there.
func matrixBackends(reg *scenarios.Registry) []string {
	var names []string
	for _, b := range reg.Backends() {
		if len(b.Isolations) > 0 {
			names = append(names, b.Name)
		}
	}
	return names
}

// Defaults of 'racetest matrix': a cell is a small run, and the whole
// default matrix on both SQL servers must stay within a few minutes.
const (
	DefaultMatrixAttempts = 8
	DefaultMatrixBursts   = 100
)

// NewCmdMatrix builds 'racetest matrix': scenario × isolation level ×
// variant on each SQL backend, as a Hermitage-style table held to the
// catalog. Tests pass runF to capture the options.
func NewCmdMatrix(f *Factory, runF func(context.Context, *MatrixOptions) error) *cobra.Command {
	opts := &MatrixOptions{Factory: f}
	c := &cobra.Command{
		Use:   "matrix",
		Short: "Run each scenario × isolation level × variant on the SQL backends: a Hermitage-style table held to the catalog",
		Long: `racetest matrix runs every scenario whose outcome depends on the isolation level (or the
ones --scenario names), at each isolation level and in each variant, on each SQL backend, and
prints one table per server: a row per scenario and variant, a column per isolation level, each
cell the verdict with the share of bursts over the limit and the conflicts the server raised.

Each cell is held to the catalog's expectation for that server; a cell that differs is marked ✗
and makes the exit code 1. A cell whose bursts proved nothing (INCONCLUSIVE) exits 4, a server
that cannot be reached 3. The header names each server's version and the settings that change
outcomes (MariaDB's innodb_snapshot_isolation, PostgreSQL running read uncommitted as read
committed).`,
		Example: `  racetest matrix
  racetest matrix --backend postgres --scenario check-then-write
  racetest matrix --variant for-update --isolation repeatable-read,serializable
  racetest matrix --bursts 20 --format markdown >> "$GITHUB_STEP_SUMMARY"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runMatrix(c.Context(), opts)
		},
	}
	var levels []string
	for _, l := range sqldb.Isolations() {
		levels = append(levels, string(l))
	}
	opts.Shape = shapeFlags{Shape: runplan.Shape{Replicas: runner.DefaultReplicas, Waves: runner.DefaultWaves,
		Latency: scenarios.DefaultLatency, TTL: scenarios.DefaultTTL}}
	fs := c.Flags()
	fs.StringSliceVarP(&opts.Backends, "backend", "b", matrixBackends(f.Registry), "SQL backends to run on, comma-separated")
	fs.StringSliceVar(&opts.Scenarios, "scenario", nil, "scenarios to run, comma-separated (default: every scenario whose expected verdict depends on the isolation level)")
	fs.StringSliceVar(&opts.Variants, "variant", nil, "variants to run, comma-separated; default names the default of a scenario whose default has no name (default: every variant of each scenario)")
	fs.StringSliceVar(&opts.Isolations, "isolation", levels, "isolation levels (the columns), comma-separated")
	fs.StringVarP(&opts.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	fs.IntVarP(&opts.Shape.Attempts, "attempts", "n", DefaultMatrixAttempts, "attempts released together in each burst")
	fs.IntVar(&opts.Shape.Bursts, "bursts", DefaultMatrixBursts, "bursts per cell, each at a fresh subject")
	fs.DurationVar(&opts.Shape.Timeout, "timeout", runner.DefaultTimeout, "per-attempt timeout; an attempt past it counts as unknown")
	fs.DurationVar(&opts.Shape.Gap, "gap", 0, "extra delay between check and write, to widen the window on purpose")
	fs.BoolVar(&opts.Shape.Keep, "keep", false, "keep every cell's namespaced tables for inspection")
	registerConn(fs, f.Registry, &opts.Shape.Conn)
	return c
}

// matrixCell is one cell to run: a scenario's variant at one isolation
// level on one backend.
type matrixCell struct {
	spec                        scenarios.Spec
	backend, isolation, variant string
}

func runMatrix(ctx context.Context, o *MatrixOptions) error {
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	cells, err := matrixCells(o)
	if err != nil {
		return err
	}
	for _, b := range o.Backends {
		if err := o.Shape.validate(o.Registry, b); err != nil {
			return err
		}
	}
	plans := make([]plan, len(cells))
	for i, c := range cells {
		if plans[i], err = matrixPlan(o, c); err != nil {
			return usageError(err)
		}
	}
	title := fmt.Sprintf("racetest matrix — scenario × isolation level × variant on %s; %d attempts × %d bursts per cell",
		strings.Join(o.Backends, ", "), o.Shape.Attempts, o.Shape.Bursts)
	if o.Format == "table" && !o.IO.OutTTY {
		fmt.Fprintf(o.IO.ErrOut, "running %d cells on %s…\n", len(plans), strings.Join(o.Backends, ", "))
	}
	start := time.Now()
	cases := executeMatrix(ctx, o.Factory, plans)
	if err := reporter(o.IO.Out, cases, reportOptions(o.IO, report.Options{
		Version: version(), Title: title, Matrix: true, Brief: true,
	})); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if o.Format == "table" {
		fmt.Fprintf(o.IO.Out, "\n%d cells in %s.\n", len(cases), time.Since(start).Round(time.Second))
	}
	return verdictError(ctx, cases)
}

// executeMatrix runs the plans, each backend's in its own goroutine: the
// servers are separate, and on a loaded machine the matrix's time is
// mostly waiting. One bar per backend counts its cells (on a terminal).
// When a backend's first cell cannot be set up (the server is down), its
// other cells are not tried: each reports the same error instead of
// waiting out its own connection timeout.
func executeMatrix(ctx context.Context, f *Factory, plans []plan) []report.Case {
	var groups [][]plan
	for i, p := range plans {
		if i == 0 || p.Case.Backend != plans[i-1].Case.Backend {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], p)
	}
	// The cells draw no bars of their own: two backends' bars would
	// interleave. The matrix draws one per backend.
	quiet := *f
	io := *f.IO
	io.ErrTTY = false
	quiet.IO = &io
	pr := newProgress(f.IO)
	results := make([][]report.Case, len(groups))
	var wg sync.WaitGroup
	for g, group := range groups {
		update, done := pr.trackUnit(group[0].Case.Backend, len(group), "cells")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done()
			n := 0
			each := func(report.Case) {
				n++
				if update != nil {
					update(runner.Progress{Done: n})
				}
			}
			first := execute(ctx, &quiet, group[:1], each)
			results[g] = first
			if len(first) == 1 && unreachable(first[0]) {
				for _, p := range group[1:] {
					c := p.Case
					c.Err = first[0].Err // the same error: the report and the exit message say it once
					results[g] = append(results[g], c)
				}
				return
			}
			results[g] = append(results[g], execute(ctx, &quiet, group[1:], each)...)
		}()
	}
	wg.Wait()
	pr.wait()
	var cases []report.Case
	for _, r := range results {
		cases = append(cases, r...)
	}
	return cases
}

// unreachable reports whether a case failed before any burst ran, for a
// reason other than a parameter or an interrupt: its server is not there.
func unreachable(c report.Case) bool {
	var bad *scenarios.ParamError
	return c.Err != nil && (c.Result == nil || len(c.Result.Bursts) == 0) &&
		!errors.As(c.Err, &bad) && !errors.Is(c.Err, context.Canceled)
}

// matrixPlan makes a matrix cell's run with runplan, as run, demo and suite
// make theirs: the catalog's expectation (resolved again once the server
// is known), strict (a cell that proved nothing is no row of a Hermitage
// table), one replica, the gate release.
func matrixPlan(o *MatrixOptions, c matrixCell) (plan, error) {
	sh := o.Shape.plan(1)
	sh.Isolation, sh.Variant = c.isolation, c.variant
	label := c.isolation
	if c.variant != "" {
		label = c.variant + ", " + label
	}
	return runplan.Build(o.Registry, runplan.Request{
		Scenario: c.spec.Name, Backend: c.backend, Name: c.spec.Name + " (" + label + ")",
		// The matrix was measured with the gate: it names it, so that the
		// default (auto, last-byte on these servers) does not change it.
		Shape: sh, Catalog: true, Strict: true, Release: "gate",
	})
}

// matrixCells checks the flags against the registry and lists the cells,
// backend by backend, then scenario, variant and isolation level: every
// mistake is a usage error before anything runs.
func matrixCells(o *MatrixOptions) ([]matrixCell, error) {
	sqlBackends := matrixBackends(o.Registry)
	if len(o.Backends) == 0 {
		return nil, usageErrorf("--backend is empty: name one or more of %s", strings.Join(sqlBackends, ", "))
	}
	for _, b := range o.Backends {
		if _, err := o.Registry.Backend(b); err != nil {
			return nil, usageError(fmt.Errorf("--backend: %w", err))
		}
		if !slices.Contains(sqlBackends, b) {
			return nil, usageErrorf("--backend %s: the matrix's columns are isolation levels, and %s has none; it runs on %s",
				b, b, strings.Join(sqlBackends, ", "))
		}
	}
	if len(o.Isolations) == 0 {
		return nil, usageErrorf("--isolation is empty: name one or more levels, or leave the flag out for all four")
	}
	var levels []string
	for _, l := range o.Isolations {
		lvl, err := sqldb.ParseIsolation(l)
		if err != nil || lvl == "" {
			return nil, usageErrorf("--isolation: unknown isolation level %q (known: read-uncommitted, read-committed, repeatable-read, serializable)", l)
		}
		for _, b := range o.Backends {
			if bk, _ := o.Registry.Backend(b); !slices.Contains(bk.Isolations, string(lvl)) {
				return nil, usageErrorf("--isolation %s: %s does not take it (it takes %s)", l, b, strings.Join(bk.Isolations, ", "))
			}
		}
		if !slices.Contains(levels, string(lvl)) {
			levels = append(levels, string(lvl))
		}
	}
	// The columns read weakest first, as the Hermitage tables do, in
	// whatever order they were asked for.
	order := sqldb.Isolations()
	slices.SortFunc(levels, func(a, b string) int {
		return slices.Index(order, sqldb.Isolation(a)) - slices.Index(order, sqldb.Isolation(b))
	})
	specs, err := matrixScenarios(o)
	if err != nil {
		return nil, err
	}
	// --variant as given, the default named "": in the order given, so
	// that of two unknown variants the user always hears of the first.
	asked := make([]string, 0, len(o.Variants))
	variants := map[string]bool{}
	for _, v := range o.Variants {
		if v == defaultVariant {
			v = ""
		}
		asked = append(asked, v)
		variants[v] = true
	}
	var cells []matrixCell
	known := map[string]bool{}
	for _, b := range o.Backends {
		for _, s := range specs {
			if !slices.Contains(o.Registry.BackendsOf(s.Name), b) {
				continue
			}
			for _, v := range o.Registry.RowVariants(s.Name, b) {
				known[v] = true
				if len(variants) > 0 && !variants[v] {
					continue
				}
				for _, l := range levels {
					cells = append(cells, matrixCell{spec: s, backend: b, isolation: l, variant: v})
				}
			}
		}
	}
	for _, v := range asked {
		if !known[v] {
			return nil, usageErrorf("--variant: no scenario of this matrix has a variant %q on %s (known: %s)",
				v, strings.Join(o.Backends, ", "), strings.Join(variantNames(known), ", "))
		}
	}
	if len(cells) == 0 {
		return nil, usageErrorf("nothing to run: no scenario of the catalog has a variant and isolation level on %s", strings.Join(o.Backends, ", "))
	}
	return cells, nil
}

// matrixScenarios are the scenarios --scenario names, each checked to run
// on one of the backends, or else every scenario whose expected verdict
// depends on the isolation level on one of them.
func matrixScenarios(o *MatrixOptions) ([]scenarios.Spec, error) {
	var specs []scenarios.Spec
	if len(o.Scenarios) == 0 {
		for _, s := range o.Registry.Scenarios() {
			if s.Topology != "" {
				continue // needs a cluster, not the one server the matrix is given
			}
			for _, b := range o.Backends {
				// Over every level the backend has, not only the columns
				// asked for: --isolation serializable keeps the same rows.
				bk, _ := o.Registry.Backend(b)
				if slices.Contains(o.Registry.BackendsOf(s.Name), b) && o.Registry.DependsOnIsolation(s.Name, b, bk.Isolations) {
					specs = append(specs, s)
					break
				}
			}
		}
		return specs, nil
	}
	for _, name := range o.Scenarios {
		s, err := o.Registry.Scenario(name)
		if err != nil {
			return nil, usageError(fmt.Errorf("--scenario: %w", err))
		}
		on := o.Registry.BackendsOf(name)
		if !slices.ContainsFunc(o.Backends, func(b string) bool { return slices.Contains(on, b) }) {
			return nil, usageErrorf("--scenario %s does not run on %s; it runs on: %s", name, strings.Join(o.Backends, ", "), strings.Join(on, ", "))
		}
		if !slices.ContainsFunc(specs, func(x scenarios.Spec) bool { return x.Name == name }) {
			specs = append(specs, s)
		}
	}
	return specs, nil
}

// defaultVariant names, in --variant, the default of a scenario whose
// default has no name of its own.
const defaultVariant = "default"

// variantNames lists variants for a message.
func variantNames(known map[string]bool) []string {
	var names []string
	for v := range known {
		if v == "" {
			v = defaultVariant
		}
		names = append(names, v)
	}
	slices.Sort(names)
	return names
}
