// Package cmd is racetest's command line: flags, wiring, exit codes and
// progress bars. It is thin: the work is in runner, scenarios and report.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/release/bench"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/spf13/cobra"
)

// factory holds what every command needs: its streams and the catalog.
type factory struct {
	IO       *ioStreams
	Registry *scenarios.Registry
	// Executable is this program, which 'racetest bench' starts again to
	// serve its HTTP targets from a process of their own; "" (as in
	// tests) serves them in process.
	Executable string
}

// Main runs racetest with the process's arguments and returns its exit code.
func Main() int {
	// racetest bench's HTTP targets are racetest started again.
	if code, ok := bench.ServeTargetFromEnv(); ok {
		return code
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// go-redis logs failed dials to stderr on its own; our errors say it better.
	redisdb.QuietDriverLog()
	f := &factory{IO: systemStreams(), Registry: builtin.Registry()}
	if exe, err := os.Executable(); err == nil {
		f.Executable = exe
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go watchInterrupts(sigs, cancel, f.IO.ErrOut, os.Exit)
	root := newCmdRoot(f)
	root.SetArgs(os.Args[1:])
	c, err := root.ExecuteContextC(ctx)
	printCommandError(f.IO, err, c)
	return exitCode(err)
}

// watchInterrupts turns the first Ctrl-C (or SIGTERM) into a cancelled
// context: the run stops after the burst in flight, reports what finished
// and drops what it made. A second one ends the process at once, for a
// cleanup that waits on a stuck server: it says what may be left behind
// and how to remove it.
func watchInterrupts(sigs <-chan os.Signal, cancel func(), w io.Writer, exit func(int)) {
	<-sigs
	cancel()
	fmt.Fprintln(w, "racetest: interrupted: stopping; a run under way finishes its burst in flight and drops what it made (Ctrl-C again to quit at once)")
	<-sigs
	fmt.Fprintln(w, "racetest: interrupted again: quitting without waiting for the cleanup. "+inFlight.leftovers())
	exit(exitInterrupted)
}

// printError prints err for a person, unless the command's own output already
// said it.
func printError(io *ioStreams, err error) { printCommandError(io, err, nil) }

// printCommandError is printError for an error of command c: a usage
// error points at c's own help ("racetest sql --help"), where the flag
// that was wrong is described, not at the root's.
func printCommandError(io *ioStreams, err error, c *cobra.Command) {
	if err == nil {
		return
	}
	if e, ok := err.(*exitError); ok && e.quiet {
		return
	}
	if exitCode(err) == exitInterrupted {
		fmt.Fprintln(io.ErrOut, "racetest: interrupted")
		return
	}
	msg := err.Error()
	if exitCode(err) == exitUsage && c != nil {
		msg += envSource(c, msg)
	}
	fmt.Fprintln(io.ErrOut, "racetest: "+printable.Text(msg))
	if e, ok := errors.AsType[*exitError](err); ok && e.input {
		return
	}
	if exitCode(err) == exitUsage {
		path := "racetest"
		if c != nil {
			path = c.CommandPath()
		}
		fmt.Fprintf(io.ErrOut, "Run '%s --help' for usage.\n", path)
	}
}

// newCmdRoot builds the command tree.
func newCmdRoot(f *factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "racetest",
		Short: "Fire simultaneous attempts at a \"do it once\" pattern and count what really ran",
		Long: `racetest fires N simultaneous attempts at one guarded action (save with a token, pay a
reward, take a lease), repeats the burst many times, and counts in the store itself how
many attempts actually executed — the races a one-click test never sees.`,
		Example:       rootExamples,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	// --version prints what 'racetest version' prints.
	root.SetVersionTemplate(currentVersionLine() + "\n")
	// No -v: on run, demo, suite and http, -v is --verbose.
	root.Flags().Bool("version", false, "print racetest's version, as 'racetest version' does")
	root.SetUsageTemplate(usageTemplate)
	if f.IO.ColorMode == "" {
		f.IO.ColorMode = "auto"
	}
	root.PersistentFlags().StringVar(&f.IO.ColorMode, "color", f.IO.ColorMode,
		"colour: auto (on a terminal, unless NO_COLOR is set or FORCE_COLOR/CLICOLOR_FORCE forces it), always or never")
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		if err := applyEnv(c, f.Registry, f.IO.Env); err != nil {
			return err
		}
		if f.IO.Environ != nil {
			unknownEnv(f.IO.ErrOut, f.IO.Environ(), knownEnv(c.Root(), f.Registry))
		}
		if err := checkOutputFlags(c, f.IO); err != nil {
			return err
		}
		return checkConnFlags(c.Flags(), f.Registry)
	}
	root.AddCommand(
		newCmdList(f),
		newCmdRun(f, nil),
		newCmdDemo(f, nil),
		newCmdMatrix(f, nil),
		newCmdSuite(f, nil),
		newCmdBench(f, nil),
		newCmdExplain(f),
		newCmdHTTP(f, nil),
		newCmdSQL(f, nil),
		newCmdRedis(f, nil),
		newCmdMongo(f, nil),
		newCmdExplore(f, nil),
		newCmdReplay(f, nil),
		newCmdServe(f, nil),
		newCmdProxy(f, nil),
		newCmdClean(f, nil),
		newCmdVersion(f),
		newCmdReport(f, nil),
	)
	addVerbosityFlags(f.IO, root, "run", "demo", "suite", "http", "sql", "redis", "mongo")
	root.AddCommand(newEnvironmentTopic(root, f.Registry))
	strictCompletion(root)
	return root
}

// strictCompletion makes 'racetest completion SHELL' refuse a shell it
// does not know (cobra shows its help and exits 0).
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sh := range c.Commands() {
			shells = append(shells, sh.Name())
		}
		known := strings.Join(shells, ", ")
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("completion needs a shell: %s (e.g. racetest completion bash)", known)
			}
			return usageErrorf("completion: unknown shell %q: racetest knows %s", printable.Line(args[0]), known)
		}
	}
}
