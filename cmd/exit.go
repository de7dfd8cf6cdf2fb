package cmd

import (
	"context"
	"errors"
	"fmt"
)

// Exit codes, decided in one place (ExitCode) and listed in the README.
const (
	exitOK           = 0   // every expectation met
	exitViolated     = 1   // an expectation was violated
	exitUsage        = 2   // bad flags, arguments or input: nothing ran
	exitSetup        = 3   // a backend could not be reached or set up, or the report not written
	exitInconclusive = 4   // a run proved nothing, under --expect safe or --strict
	exitInterrupted  = 130 // Ctrl-C or SIGTERM
)

// exitError carries an exit code with its message.
type exitError struct {
	code int
	err  error
	// quiet: the report already told the user; print no extra line.
	quiet bool
	// input: a file's content was wrong, not the command line; --help,
	// which describes the command line, is not pointed at.
	input bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// inputErrorf is a usage error about what a file holds: exit 2, nothing
// ran, and no "Run … --help" after it.
func inputErrorf(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...), input: true}
}

func setupError(err error) error { return &exitError{code: exitSetup, err: err} }

// outputError is a report that could not be written to standard output (a
// full disk, a closed pipe): exit 3, as for a backend that could not be
// reached, since the run happened and only its report is missing. A report
// file's error names its path itself (writeReport).
func outputError(what string, err error) error {
	return &exitError{code: exitSetup, err: fmt.Errorf("writing the %s to standard output: %w", what, err)}
}

// exitCode maps a command's error to the process exit code. Errors that
// carry no code come from argument parsing, before anything ran: usage.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitUsage
}
