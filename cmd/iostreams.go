package cmd

import (
	"bytes"
	"io"
	"os"
	"strconv"

	"github.com/racetest/racetest/report"

	"golang.org/x/term"
)

// IOStreams are a command's standard streams, with what is known of them.
// Tests build one with Test and set the TTY flags they want.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY and ErrTTY say whether the stream is a terminal: colour only
	// on a terminal stdout, progress bars only on a terminal stderr.
	OutTTY bool
	ErrTTY bool
	// InTTY says stdin is a terminal (a person can press Enter).
	InTTY bool
	// NoColor is set by the NO_COLOR convention.
	NoColor bool
	// TermWidth is the columns of the terminal stdout is (0: not a
	// terminal, or unknown).
	TermWidth int
}

// System returns the process's streams.
func System() *IOStreams {
	_, noColor := os.LookupEnv("NO_COLOR")
	width := 0
	if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
		width = w
	}
	return &IOStreams{
		TermWidth: width,
		In:        os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		OutTTY:  term.IsTerminal(int(os.Stdout.Fd())),
		ErrTTY:  term.IsTerminal(int(os.Stderr.Fd())),
		InTTY:   term.IsTerminal(int(os.Stdin.Fd())),
		NoColor: noColor || os.Getenv("TERM") == "dumb",
	}
}

// Test returns streams backed by buffers, neither of them a terminal.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}, out, errOut
}

// Width is the columns a table may use: the terminal's, else $COLUMNS (as
// a shell sets it for a pipe the user looks at), else report.DefaultWidth —
// a fixed width, so that a CI log or a file reads the same on every machine.
func (s *IOStreams) Width() int {
	if s.OutTTY && s.TermWidth > 0 {
		return s.TermWidth
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return report.DefaultWidth
}

// Color reports whether stdout output may use ANSI colour.
func (s *IOStreams) Color() bool { return s.OutTTY && !s.NoColor }
