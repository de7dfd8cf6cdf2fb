package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
	"github.com/spf13/cobra"
)

// demoOptions are the parsed flags of 'racetest demo'.
type demoOptions struct {
	*factory
	Backend  string
	Format   string
	Timeline bool
	// Details adds each case's figures and timeline, between the table
	// and the table again.
	Details bool
	Strict  bool
	// Cluster runs the clustered scenarios' rows (replica-read,
	// failover-lock) on the clusters scripts/cluster.sh started, named by
	// the same connection flags and RACETEST_* variables as run.
	Cluster bool
	Shape   shapeFlags
	// burstsSet: --bursts was given, so it applies to every row.
	burstsSet bool
	// backendSet: --backend was given; with --cluster it keeps that
	// backend's rows only.
	backendSet bool
}

// newCmdDemo builds 'racetest demo': every built-in scenario, naive to safe,
// side by side, each checked against the catalog's expectation.
func newCmdDemo(f *factory, runF func(context.Context, *demoOptions) error) *cobra.Command {
	opts := &demoOptions{factory: f}
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run every built-in scenario side by side, naive to safe (exits 0 when each behaves as the catalog says)",
		Example: `  racetest demo
  racetest demo --details
  racetest demo --backend redis
  racetest demo --format html > demo.html
  racetest demo --format json
  eval "$(scripts/cluster.sh start postgres-replica)"; racetest demo --cluster`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.burstsSet = c.Flags().Changed("bursts")
			opts.backendSet = c.Flags().Changed("backend")
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runDemo(c.Context(), opts)
		},
	}
	fs := c.Flags()
	fs.StringVarP(&opts.Backend, "backend", "b", "memory", backendHelp(f.Registry))
	fs.StringVarP(&opts.Format, "format", "o", "table", "output format: "+strings.Join(report.Formats(), ", "))
	fs.BoolVar(&opts.Details, "details", false, "show each case's figures, notes and (with --timeline) the timeline of each RACE, between the table and the table again")
	fs.BoolVar(&opts.Timeline, "timeline", true, "with --details, draw the example burst of each RACE as a timeline (table format)")
	fs.BoolVar(&opts.Strict, "strict", false, "fail (exit 4) when a SAFE scenario's bursts did not overlap enough to prove anything")
	fs.BoolVar(&opts.Cluster, "cluster", false, "run the clustered rows instead (replica-read, failover-lock) on the clusters scripts/cluster.sh started, "+
		"named by the connection flags or RACETEST_* variables it prints; rows whose cluster is not running are skipped and named")
	opts.Shape.register(fs, f.Registry, verbShape{fires: firesScenario, attempts: 8, bursts: 100})
	completeEnums(c, f.Registry)
	return c
}

func runDemo(ctx context.Context, o *demoOptions) error {
	// The run works on its own copy (validate draws a seed, --effects auto
	// sets the solo twins): the parsed options stay as given.
	own := *o
	o = &own
	if _, err := o.Registry.Backend(o.Backend); err != nil {
		return usageError(err)
	}
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	var plans []plan
	var title, where string
	if o.Cluster {
		if o.Shape.effects != "" {
			return usageErrorf("--effects does not apply to --cluster: the clustered rows count their own effects on the replicas; leave out one of the two")
		}
		if plans, title, err = clusterDemoPlans(ctx, o); err != nil {
			return err
		}
		where = "the clusters"
	} else {
		if err := o.Shape.validate(o.Registry, o.Backend); err != nil {
			return err
		}
		if err := o.Shape.checkEngine(o.Registry, o.Backend); err != nil {
			return err
		}
		if err := o.Shape.auto(o.Backend); err != nil {
			return err
		}
		var counted []string
		for _, spec := range o.Registry.Scenarios() {
			// A clustered scenario needs a primary and a replica: its rows
			// run under --cluster only.
			if len(spec.Demo) == 0 || spec.Topology != "" || !has(o.Registry.BackendsOf(spec.Name), o.Backend) {
				continue
			}
			// --effects auto shows the rows a change of the store can
			// judge; the rest are named, never judged otherwise unasked.
			if o.Shape.SoloEvery > 0 && memstore.AutoRefusal(spec.Name) != "" {
				counted = append(counted, spec.Name)
				continue
			}
			for _, dc := range spec.Demo {
				p, err := demoPlan(o, spec, dc, o.Backend)
				if err != nil {
					return usageError(err)
				}
				plans = append(plans, p)
			}
		}
		if len(plans) == 0 {
			return usageErrorf("backend %s has no demo scenarios", o.Backend)
		}
		title = fmt.Sprintf("racetest demo — %d runs on %s, %d attempts released together, up to %d bursts each",
			len(plans), o.Backend, o.Shape.Attempts, o.Shape.Bursts)
		if o.Backend == "memory" {
			title += fmt.Sprintf(", simulated round trip %s", o.Shape.Latency)
		}
		if o.Shape.SoloEvery > 0 {
			title += "; each burst judged beside a solo twin, the same attempts one at a time on one replica (--details: what each wrote alone and together)"
			if len(counted) > 0 && !o.IO.Quiet {
				fmt.Fprintf(o.IO.ErrOut, "racetest: --effects auto: left out %s (judged by their own counts: run the demo without --effects auto)\n", strings.Join(slices.Compact(counted), ", "))
			}
		}
		where = o.Backend
	}
	if o.Format == "table" && !o.IO.OutTTY && !o.IO.Quiet {
		// In a pipe there are no bars: say what is happening on stderr.
		fmt.Fprintf(o.IO.ErrOut, "running %d scenarios on %s…\n", len(plans), where)
	}
	cases := execute(ctx, o.factory, plans, nil)
	if err := reporter(o.IO.Out, cases, reportOptions(o.IO, report.Options{
		Timeline: o.Timeline, Version: version(), Title: title, Brief: true,
		Summary: !o.Details, TableLast: o.Details,
	})); err != nil {
		return outputError("report", err)
	}
	if o.Format == "table" && !o.Details && !o.IO.Quiet {
		fmt.Fprintln(o.IO.Out, "\nMore: --details (each case's figures and timelines), --format html (one page).")
	}
	return verdictError(ctx, cases)
}

func demoPlan(o *demoOptions, spec scenarios.Spec, dc scenarios.DemoCase, backend string) (plan, error) {
	sh := o.Shape.plan(o.Shape.Replicas)
	if dc.Replicas > 0 {
		sh.Replicas = dc.Replicas
	}
	if dc.Waves > 0 {
		sh.Waves, sh.Deploy = dc.Waves, dc.Deploy
	}
	if dc.Variant != "" {
		sh.Variant = dc.Variant
	}
	if dc.Gap > 0 && sh.Gap == 0 {
		sh.Gap = dc.Gap
	}
	name := spec.Name
	if dc.Label != "" {
		name += " (" + dc.Label + ")"
	}
	p, err := runplan.Build(o.Registry, runplan.Request{
		Scenario: spec.Name, Backend: backend, Name: name, Shape: sh, Catalog: true, Strict: o.Strict,
	})
	if err != nil {
		return plan{}, err
	}
	if dc.Bursts > 0 && !o.burstsSet {
		p.Config.Bursts = min(p.Config.Bursts, dc.Bursts)
	}
	return p, nil
}

func has(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// wrap folds text to width columns, for stories printed on a terminal.
func wrap(s string, indent string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		b.WriteString(indent + line + "\n")
	}
	return b.String()
}
