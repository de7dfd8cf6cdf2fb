package cmd

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// NewCmdList builds 'racetest list': scenarios with their lessons and the
// backends that run them, then the backends.
func NewCmdList(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the scenarios and backends",
		Args:  cobra.NoArgs,
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

// NewCmdExplain builds 'racetest explain SCENARIO'.
func NewCmdExplain(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "explain SCENARIO",
		Short: "Tell a scenario's story: the naive code, why it breaks, the fix, what to look for",
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
			fmt.Fprintf(w, "Try it:  racetest run %s\n", s.Name)
			return nil
		},
	}
}
