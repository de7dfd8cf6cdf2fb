package cmd

import (
	"bytes"
	"io"
	"os"

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
	// NoColor is set by the NO_COLOR convention.
	NoColor bool
}

// System returns the process's streams.
func System() *IOStreams {
	_, noColor := os.LookupEnv("NO_COLOR")
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		OutTTY:  term.IsTerminal(int(os.Stdout.Fd())),
		ErrTTY:  term.IsTerminal(int(os.Stderr.Fd())),
		NoColor: noColor || os.Getenv("TERM") == "dumb",
	}
}

// Test returns streams backed by buffers, neither of them a terminal.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}, out, errOut
}

// Color reports whether stdout output may use ANSI colour.
func (s *IOStreams) Color() bool { return s.OutTTY && !s.NoColor }
