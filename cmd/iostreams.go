package cmd

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/racetest/racetest/report"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// ioStreams are a command's standard streams, with what is known of them
// and what the user asked of the output (--color, -q, -v). Tests build one
// with Test and set the TTY flags and environment they want.
type ioStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY and ErrTTY say whether the stream is a terminal: colour only
	// on a terminal (unless asked), progress bars only on a terminal stderr.
	OutTTY bool
	ErrTTY bool
	// InTTY says stdin is a terminal (a person can press Enter).
	InTTY bool
	// NoColor forbids colour whatever the rest says, short of --color
	// always: a test's or an embedder's switch (the environment's NO_COLOR
	// is read through Env).
	NoColor bool
	// TermWidth is the columns of the terminal stdout is (0: not a
	// terminal, or unknown).
	TermWidth int
	// Env looks up the colour conventions' variables (NO_COLOR,
	// FORCE_COLOR, CLICOLOR_FORCE, TERM) and the settings by environment
	// (RACETEST_<FLAG>, environment.go); nil is an empty environment.
	Env func(string) (string, bool)
	// Environ lists the environment, for the warning on a RACETEST_
	// variable racetest does not read; nil lists nothing.
	Environ func() []string
	// ColorMode is --color: auto (the default), always or never.
	ColorMode string
	// Quiet (-q) keeps only the verdict lines; Verbose (-v) adds a line
	// per burst. Only run, demo, suite and http have the flags.
	Quiet, Verbose bool
}

// systemStreams returns the process's streams.
func systemStreams() *ioStreams {
	width := 0
	if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
		width = w
	}
	return &ioStreams{
		TermWidth: width,
		In:        os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		OutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		InTTY:  term.IsTerminal(int(os.Stdin.Fd())),
		Env:    os.LookupEnv, Environ: os.Environ,
	}
}

// testStreams returns streams backed by buffers, neither of them a terminal, in
// an empty environment.
func testStreams() (*ioStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &ioStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}, out, errOut
}

// Width is the columns a table may use: the terminal's, else $COLUMNS (as
// a shell sets it for a pipe the user looks at), else report.DefaultWidth —
// a fixed width, so that a CI log or a file reads the same on every machine.
func (s *ioStreams) Width() int {
	if s.OutTTY && s.TermWidth > 0 {
		return s.TermWidth
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return report.DefaultWidth
}

// Color reports whether stdout may use ANSI colour.
func (s *ioStreams) Color() bool { return s.colorOn(s.OutTTY) }

// ErrColor reports whether stderr may use ANSI colour (a suite's log).
func (s *ioStreams) ErrColor() bool { return s.colorOn(s.ErrTTY) }

func (s *ioStreams) colorOn(tty bool) bool {
	env := s.Env
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	return useColor(s.ColorMode, env, tty && !s.NoColor)
}

// colorModes are --color's values.
var colorModes = []string{"auto", "always", "never"}

// useColor decides colour for one stream, in this order (the first that
// speaks decides):
//
//  1. --color always or never;
//  2. NO_COLOR set to anything but "" (no-color.org): no colour;
//  3. FORCE_COLOR or CLICOLOR_FORCE set to anything but "", "0" or
//     "false" (force-color.org, bixense.com/clicolors): colour, even in a
//     pipe;
//  4. otherwise colour only on a terminal whose TERM is not "dumb".
//
// So an explicit flag beats the environment, and "no" beats "force".
func useColor(mode string, env func(string) (string, bool), tty bool) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if v, _ := env("NO_COLOR"); v != "" {
		return false
	}
	for _, name := range []string{"FORCE_COLOR", "CLICOLOR_FORCE"} {
		if v, _ := env(name); v != "" && v != "0" && v != "false" {
			return true
		}
	}
	if t, _ := env("TERM"); t == "dumb" {
		return false
	}
	return tty
}

// addVerbosityFlags gives the named commands -q/--quiet and -v/--verbose.
func addVerbosityFlags(s *ioStreams, root *cobra.Command, names ...string) {
	for _, c := range root.Commands() {
		if !slices.Contains(names, c.Name()) {
			continue
		}
		c.Flags().BoolVarP(&s.Quiet, "quiet", "q", false, "print only the verdict line of each case (table format; errors still go to stderr)")
		c.Flags().BoolVarP(&s.Verbose, "verbose", "v", false, "add a line per burst under each case: effects, outcomes, overlap, spread (table format)")
	}
}

// checkOutputFlags refuses a --color that is not a mode, and -q with -v.
func checkOutputFlags(c *cobra.Command, s *ioStreams) error {
	if !slices.Contains(colorModes, s.ColorMode) {
		return usageErrorf("--color %q: want auto, always or never", s.ColorMode)
	}
	if s.Quiet && s.Verbose {
		return usageErrorf("%s: -q (--quiet) and -v (--verbose) contradict each other: give one", c.Name())
	}
	return nil
}
