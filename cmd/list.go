package cmd

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/cobra"
)

// newCmdList builds 'racetest list': scenarios with their lessons and the
// backends that run them, then the backends.
func newCmdList(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the scenarios and backends",
		Example: `  racetest list
  racetest list | grep redis`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			w := tabwriter.NewWriter(f.IO.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "SCENARIO\tBACKENDS\tLESSON")
			for _, s := range f.Registry.Scenarios() {
				fmt.Fprintf(w, "%s\t%s\t%s\n", s.Name, strings.Join(f.Registry.BackendsOf(s.Name), ","), s.Lesson)
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "BACKEND\tSERVER\tWHAT")
			for _, b := range f.Registry.Backends() {
				server := "none needed"
				if b.Server {
					server = "required"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", b.Name, server, b.Summary)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(f.IO.Out, "\nRun 'racetest explain SCENARIO' for the story of one, 'racetest demo' to see them all.")
			return nil
		},
	}
}

// newCmdExplain builds 'racetest explain SCENARIO'.
func newCmdExplain(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "explain SCENARIO",
		Short: "Tell a scenario's story: the naive code, why it breaks, the fix, what to look for",
		Long: `explain tells a scenario's story as a trainer would: the naive code, why it breaks, the
fix and what to look for in the numbers; then the backends it runs on, its variants, and
commands to try it, naive to safe, each expecting what the catalog says it shows (so each
exits 0 when the scenario behaves as told).`,
		Example: `  racetest explain check-then-write
  racetest explain reward-payout`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("explain takes one scenario (see 'racetest list'), got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return scenarioNames(f.Registry), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			s, err := f.Registry.Scenario(args[0])
			if err != nil {
				return usageError(err)
			}
			w := f.IO.Out
			fmt.Fprintf(w, "%s — %s\n\n", s.Name, s.Lesson)
			for _, part := range []struct{ title, text string }{
				{"The naive code", s.Story.Naive},
				{"Why it breaks", s.Story.Breaks},
				{"The fix", s.Story.Fix},
				{"What to look for in the numbers", s.Story.Numbers},
			} {
				if part.text == "" {
					continue
				}
				fmt.Fprintln(w, part.title)
				fmt.Fprintln(w, wrap(part.text, "    "))
			}
			fmt.Fprintf(w, "Runs on: %s\n", strings.Join(f.Registry.BackendsOf(s.Name), ", "))
			variants := s.Variants
			for _, dc := range s.Demo {
				if dc.Variant != "" && !slices.Contains(variants, dc.Variant) {
					variants = append(variants, dc.Variant)
				}
			}
			if len(variants) > 0 {
				fmt.Fprintf(w, "Variants: %s (--variant)\n", strings.Join(variants, ", "))
			}
			fmt.Fprintln(w, "Try it:")
			for _, cmd := range tryIt(f.Registry, s) {
				fmt.Fprintln(w, "  "+cmd)
			}
			if s.Topology != "" {
				fmt.Fprintf(w, "  (needs a %s topology, not one server: 'scripts/cluster.sh' starts one and prints the flags to add; 'racetest demo --cluster' runs every clustered row; see docs/clusters.md)\n", s.Topology)
			}
			return nil
		},
	}
}

// tryIt is a command per demo row of a scenario, naive to safe: on the
// memory backend where the scenario runs there (no server needed), with
// the row's variant and shape, and --expect set to what the catalog says
// the row shows, so that each command exits 0 when the story holds.
func tryIt(reg *scenarios.Registry, s scenarios.Spec) []string {
	backend := "memory"
	if backends := reg.BackendsOf(s.Name); len(backends) > 0 && !slices.Contains(backends, backend) {
		backend = backends[0]
	}
	rows := s.Demo
	if len(rows) == 0 {
		rows = []scenarios.DemoCase{{}}
	}
	var cmds []string
	for _, dc := range rows {
		args := []string{"racetest", "run", s.Name}
		if backend != "memory" {
			args = append(args, "--backend", backend)
		}
		p := scenarios.Params{Replicas: 1, Variant: dc.Variant}
		if dc.Variant != "" {
			args = append(args, "--variant", dc.Variant)
		}
		if dc.Replicas > 1 {
			p.Replicas = dc.Replicas
			args = append(args, "--replicas", strconv.Itoa(dc.Replicas))
		}
		if dc.Waves > 1 {
			args = append(args, "--waves", strconv.Itoa(dc.Waves))
			if dc.Deploy {
				args = append(args, "--deploy")
			}
		}
		if dc.Gap > 0 {
			args = append(args, "--gap", dc.Gap.String())
		}
		if dc.Bursts > 0 {
			args = append(args, "--bursts", strconv.Itoa(dc.Bursts))
		}
		if e, _ := reg.Expect(s.Name, backend, p, ""); e != scenarios.ExpectSafe {
			args = append(args, "--expect", string(e))
		}
		cmds = append(cmds, strings.Join(args, " "))
	}
	return cmds
}
