package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/suite"
	"github.com/spf13/cobra"
)

// matrixOptions are the parsed flags of 'racetest matrix'.
type matrixOptions struct {
	*factory
	Backends   []string
	Scenarios  []string
	Variants   []string
	Isolations []string
	Format     string
	Shape      shapeFlags
}

// Defaults of 'racetest matrix': a cell is a small run, and the whole
// default matrix on both SQL servers must stay within a few minutes.
const (
	defaultMatrixAttempts = 8
	defaultMatrixBursts   = 100
)

// newCmdMatrix builds 'racetest matrix': scenario × isolation level ×
// variant on each SQL backend, as a Hermitage-style table held to the
// catalog. Tests pass runF to capture the options.
func newCmdMatrix(f *factory, runF func(context.Context, *matrixOptions) error) *cobra.Command {
	opts := &matrixOptions{factory: f}
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
	fs := c.Flags()
	fs.StringSliceVarP(&opts.Backends, "backend", "b", suite.MatrixBackends(f.Registry), "SQL backends to run on, comma-separated")
	fs.StringSliceVar(&opts.Scenarios, "scenario", nil, "scenarios to run, comma-separated (default: every scenario whose expected verdict depends on the isolation level)")
	fs.StringSliceVar(&opts.Variants, "variant", nil, "variants to run, comma-separated; default names the default of a scenario whose default has no name (default: every variant of each scenario)")
	fs.StringSliceVar(&opts.Isolations, "isolation", levels, "isolation levels (the columns), comma-separated")
	fs.StringVarP(&opts.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	opts.Shape.register(fs, f.Registry, verbShape{fires: firesMatrix, attempts: defaultMatrixAttempts, bursts: defaultMatrixBursts,
		usage: map[string]string{"bursts": "bursts per cell, each at a fresh subject", "keep": "keep every cell's namespaced tables for inspection"}})
	return c
}

func runMatrix(ctx context.Context, o *matrixOptions) error {
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	m := suite.Matrix{Backends: o.Backends, Scenarios: o.Scenarios, Variants: o.Variants, Isolations: o.Isolations}
	cells, err := m.Cells(o.Registry, func(name string) string { return "--" + name })
	if err != nil {
		return usageError(err)
	}
	// The run's own shape (validate draws a seed): the parsed options
	// stay as given.
	sh := o.Shape
	for _, b := range o.Backends {
		if err := sh.validate(o.Registry, b); err != nil {
			return err
		}
	}
	// A cell is a small run of its own, made as run, demo and suite make
	// theirs: one replica, the catalog's expectation.
	plans := make([]plan, len(cells))
	for i, c := range cells {
		if plans[i], err = runplan.Build(o.Registry, c.Request(sh.plan(1))); err != nil {
			return usageError(err)
		}
	}
	title := fmt.Sprintf("racetest matrix — scenario × isolation level × variant on %s; %d attempts × %d bursts per cell",
		strings.Join(o.Backends, ", "), o.Shape.Attempts, o.Shape.Bursts)
	if o.Format == "table" && !o.IO.OutTTY {
		fmt.Fprintf(o.IO.ErrOut, "running %d cells on %s…\n", len(plans), strings.Join(o.Backends, ", "))
	}
	start := time.Now()
	cases := executeMatrix(ctx, o.factory, plans)
	// The table ends with how long the matrix took.
	timed := func(w io.Writer, cs []report.Case, opts report.Options) error {
		if err := reporter(w, cs, opts); err != nil {
			return err
		}
		if o.Format == "table" {
			fmt.Fprintf(w, "\n%d cells in %s.\n", len(cs), time.Since(start).Round(time.Second))
		}
		return nil
	}
	return finish(ctx, o.IO, timed, cases, reportOptions(o.IO, report.Options{
		Version: version(), Title: title, Matrix: true, Brief: true,
	}))
}

// executeMatrix runs the plans, each backend's in its own goroutine: the
// servers are separate, and on a loaded machine the matrix's time is
// mostly waiting. One bar per backend counts its cells (on a terminal).
// When a backend's first cell cannot be set up (the server is down), its
// other cells are not tried: each reports the same error instead of
// waiting out its own connection timeout.
func executeMatrix(ctx context.Context, f *factory, plans []plan) []report.Case {
	var groups [][]plan
	for i, p := range plans {
		if i == 0 || p.Case.Backend != plans[i-1].Case.Backend {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], p)
	}
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
			// The cells draw no bars of their own: two backends' bars would
			// interleave. The matrix draws one per backend.
			first := executeOn(ctx, f, noBars, group[:1], each)
			results[g] = first
			if len(first) == 1 && unreachable(first[0]) {
				for _, p := range group[1:] {
					c := p.Case
					c.Err = first[0].Err // the same error: the report and the exit message say it once
					results[g] = append(results[g], c)
				}
				return
			}
			results[g] = append(results[g], executeOn(ctx, f, noBars, group[1:], each)...)
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
