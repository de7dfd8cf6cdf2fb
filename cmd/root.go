// Package cmd is racetest's command line: flags, wiring, exit codes and
// progress bars. It is thin: the work is in runner, scenarios and report.
package cmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/racetest/racetest/cmd.Version=v1.2.3";
// otherwise it is read from the module's build information.
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Factory holds what every command needs: its streams and the catalog.
type Factory struct {
	IO       *IOStreams
	Registry *scenarios.Registry
}

// Main runs racetest with the process's arguments and returns its exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// go-redis logs failed dials to stderr on its own; our errors say it better.
	redisstore.QuietDriverLog()
	f := &Factory{IO: System(), Registry: builtin.Registry()}
	root := NewCmdRoot(f)
	root.SetArgs(os.Args[1:])
	err := root.ExecuteContext(ctx)
	printError(f.IO, err)
	return ExitCode(err)
}

// printError prints err for a person, unless the command's own output already
// said it.
func printError(io *IOStreams, err error) {
	if err == nil {
		return
	}
	if e, ok := err.(*exitError); ok && e.quiet {
		return
	}
	if ExitCode(err) == ExitInterrupted {
		fmt.Fprintln(io.ErrOut, "racetest: interrupted")
		return
	}
	fmt.Fprintln(io.ErrOut, "racetest: "+err.Error())
	if ExitCode(err) == ExitUsage {
		fmt.Fprintln(io.ErrOut, "Run 'racetest --help' for usage.")
	}
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "racetest",
		Short: "Fire simultaneous attempts at a \"do it once\" pattern and count what really ran",
		Long: `racetest fires N simultaneous attempts at one guarded action (save with a token, pay a
reward, take a lease), repeats the burst many times, and counts in the store itself how
many attempts actually executed — the races a one-click test never sees.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(
		NewCmdList(f),
		NewCmdRun(f, nil),
		NewCmdDemo(f, nil),
		NewCmdSuite(f, nil),
		NewCmdBench(f, nil),
		NewCmdExplain(f),
		NewCmdHTTP(f, nil),
		NewCmdSQL(f, nil),
		NewCmdRedis(f, nil),
		NewCmdMongo(f, nil),
		NewCmdServe(f, nil),
		NewCmdVersion(f),
	)
	return root
}

// NewCmdVersion prints racetest's version.
func NewCmdVersion(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print racetest's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(f.IO.Out, "racetest "+version())
			return nil
		},
	}
}
