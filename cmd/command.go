package cmd

import (
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/scenarios"
)

// outputFlag names the flags that choose how a report looks, not what
// runs: a Reproduce line leaves them to the reader.
var outputFlag = map[string]bool{"color": true, "format": true, "quiet": true, "verbose": true, "timeline": true}

// commandLine is the command c ran as, for a report's Reproduce line:
// 'racetest' and c's path, its arguments, and every flag the command line
// or the environment gave (but how its report looks), shell-quoted so that it runs as printed. The
// connection flags are left out, since they may hold a password: the
// reader's own connection (flag or RACETEST_* variable) applies.
func commandLine(c *cobra.Command, args []string, reg *scenarios.Registry) string {
	words := []string{c.CommandPath()}
	words = append(words, args...)
	var flags []*pflag.Flag
	c.Flags().Visit(func(f *pflag.Flag) { flags = append(flags, f) })
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, f := range flags {
		if envSkipped(f, reg) || outputFlag[f.Name] {
			continue
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				words = append(words, "--"+f.Name, v)
			}
			continue
		}
		if f.Value.Type() == "bool" {
			if b, _ := strconv.ParseBool(f.Value.String()); b {
				words = append(words, "--"+f.Name)
			} else {
				words = append(words, "--"+f.Name+"=false")
			}
			continue
		}
		words = append(words, "--"+f.Name, f.Value.String())
	}
	// CommandPath is "racetest sql": one word each.
	line := printable.ShellLine(words[1:]...)
	return c.CommandPath() + " " + line
}
