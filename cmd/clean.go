package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/cobra"
)

// cleanOptions are the parsed flags of 'racetest clean'.
type cleanOptions struct {
	*factory
	Backend   string
	OlderThan time.Duration
	RunID     string
	DryRun    bool
	Conn      scenarios.Connections
	// olderThanSet: --older-than was given, so it also applies to runs of
	// other hosts, whose liveness cannot be checked from here.
	olderThanSet bool
}

// janitors are the backends 'clean' knows, in the registry's order: those
// with a Janitor (the others keep nothing between runs).
func janitors(reg *scenarios.Registry) (with, without []scenarios.Backend) {
	for _, b := range reg.Backends() {
		if b.Janitor != nil {
			with = append(with, b)
		} else {
			without = append(without, b)
		}
	}
	return with, without
}

// otherHostAge is how old a run registered from another host must be
// before clean drops it without --older-than: its process cannot be asked
// whether it still runs.
const otherHostAge = time.Hour

// newCmdClean builds 'racetest clean'. Tests pass runF to capture the options.
func newCmdClean(f *factory, runF func(context.Context, *cleanOptions) error) *cobra.Command {
	opts := &cleanOptions{factory: f}
	c := &cobra.Command{
		Use:   "clean",
		Short: "Find and drop what killed racetest runs left on the servers (only objects a registered run made)",
		Long: `clean lists, on each server backend, the runs racetest registered and did not
finish cleaning up (a run killed with SIGKILL, a server that went away), and drops
their tables, keys or collections: only objects named racetest_<run id>_… whose
run id is registered, never a name racetest did not create. A run whose process
still runs on this host is left alone; a run registered from another host is
dropped only when older than --older-than (default 1h for those).`,
		Example: `  racetest clean --dry-run
  racetest clean --backend postgres --older-than 1h
  racetest clean --run-id 1a2b3c4d`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.olderThanSet = c.Flags().Changed("older-than")
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runClean(c.Context(), opts)
		},
	}
	fs := c.Flags()
	var names []string
	cleaned, _ := janitors(f.Registry)
	for _, b := range cleaned {
		names = append(names, b.Name)
	}
	fs.StringVarP(&opts.Backend, "backend", "b", "", "clean only this backend: "+orList(names)+" (default: each)")
	fs.DurationVar(&opts.OlderThan, "older-than", 0, "only runs that started at least this long ago")
	fs.StringVar(&opts.RunID, "run-id", "", "only this run")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "list what would be dropped, drop nothing")
	registerConn(fs, f.Registry, &opts.Conn)
	return c
}

func runClean(ctx context.Context, o *cleanOptions) error {
	if o.OlderThan < 0 {
		return usageErrorf("--older-than cannot be negative (got %s)", o.OlderThan)
	}
	if o.RunID != "" {
		if err := (scenarios.Params{RunID: o.RunID}).Validate(); err != nil {
			return usageError(err)
		}
	}
	var known, none []string
	var visit []scenarios.Backend
	cleaned, keepNothing := janitors(o.Registry)
	for _, b := range cleaned {
		known = append(known, b.Name)
		if o.Backend == "" || o.Backend == b.Name {
			visit = append(visit, b)
		}
	}
	if len(visit) == 0 {
		for _, b := range keepNothing {
			none = append(none, b.Name)
		}
		return usageErrorf("clean: unknown backend %q — use one of: %s (%s keeps nothing between runs)", o.Backend, strings.Join(known, ", "), strings.Join(none, ", "))
	}
	out := o.IO.Out
	var failed []string
	for _, b := range visit {
		if ctx.Err() != nil {
			return context.Canceled
		}
		jn, err := b.Janitor(ctx, o.Conn)
		if err != nil {
			// Without --backend, a server that is not there at its default
			// address is not one the user uses: say so, and go on.
			if o.Backend == "" && (b.Conn == nil || o.Conn.Get(b.Conn.Key) == "") {
				fmt.Fprintf(out, "%s: skipped, no server at the default address (%v)\n", b.Name, err)
				continue
			}
			failed = append(failed, err.Error())
			continue
		}
		if err := o.cleanOne(ctx, jn); err != nil {
			failed = append(failed, err.Error())
		}
		jn.Close()
	}
	if len(failed) > 0 {
		return setupError(errors.New(strings.Join(failed, "\n  ")))
	}
	return nil
}

// cleanOne cleans one backend's leftovers and says what it did with each.
func (o *cleanOptions) cleanOne(ctx context.Context, j scenarios.Janitor) error {
	out := o.IO.Out
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	left, err := j.Leftovers(lctx)
	if err != nil {
		return err
	}
	verb := "dropped"
	if o.DryRun {
		verb = "would drop"
	}
	seen, dropped := 0, 0
	var errs []error
	for _, l := range left {
		if o.RunID != "" && l.RunID != o.RunID {
			continue
		}
		seen++
		if !l.Registered {
			fmt.Fprintf(out, "%s: left alone %s: named like racetest's, but no run registered them — drop them by hand if they are yours\n",
				j.Where(), listed(l.Objects))
			continue
		}
		if why := o.keep(*l.Record); why != "" {
			fmt.Fprintf(out, "%s: kept %s: %s\n", j.Where(), l.Record, why)
			continue
		}
		if o.DryRun {
			what := listed(l.Objects)
			if what == "" {
				what = "nothing but its registration"
			}
			fmt.Fprintf(out, "%s: %s %s: %s\n", j.Where(), verb, l.Record, what)
			continue
		}
		dctx, cancel := scenarios.CleanupContext(ctx)
		what, err := j.Drop(dctx, l.RunID)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", j.Where(), l.Record, err))
			continue
		}
		if what == "" {
			what = "its registration (no object was left)"
		}
		dropped++
		fmt.Fprintf(out, "%s: %s %s: %s\n", j.Where(), verb, l.Record, what)
	}
	if seen == 0 {
		if o.RunID != "" {
			fmt.Fprintf(out, "%s: nothing of run %s\n", j.Where(), o.RunID)
		} else {
			fmt.Fprintf(out, "%s: nothing left by racetest\n", j.Where())
		}
	}
	return errors.Join(errs...)
}

// keep says why a registered run is not dropped now, or "".
func (o *cleanOptions) keep(r scenarios.Record) string {
	age := time.Since(r.Started)
	if age < o.OlderThan {
		return fmt.Sprintf("started %s ago, less than --older-than %s", age.Round(time.Second), o.OlderThan)
	}
	alive, known := r.Alive()
	switch {
	case alive:
		return fmt.Sprintf("its process %d still runs on this host — stop it first", r.PID)
	case !known && !o.olderThanSet && age < otherHostAge:
		return fmt.Sprintf("registered from another host %s ago; racetest cannot tell whether it still runs — give --older-than to drop it", age.Round(time.Second))
	}
	return ""
}

// listedMax is how many object names a line of 'clean' shows: a killed
// Redis run leaves a key or two per burst, thousands of them.
const listedMax = 10

// listed names objects, the first listedMax of them and how many more.
func listed(objects []string) string {
	if len(objects) <= listedMax {
		return strings.Join(objects, ", ")
	}
	return fmt.Sprintf("%s and %d more (%d in all)", strings.Join(objects[:listedMax], ", "), len(objects)-listedMax, len(objects))
}
