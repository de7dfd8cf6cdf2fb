package suite

import (
	"fmt"
	"strings"
)

// Error is one problem in a suite file, at a line and column (both 1-based;
// 0 when the problem belongs to the file as a whole).
type Error struct {
	File         string
	Line, Column int
	Msg          string
	// source is the offending line, shown under the message with a caret.
	source string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Excerpt is the offending line with a caret under the column, for a
// person reading a terminal; empty when the line is unknown.
func (e *Error) Excerpt() string {
	if e.Line == 0 || e.source == "" {
		return ""
	}
	gutter := fmt.Sprintf("%5d | ", e.Line)
	pad := strings.Repeat(" ", len(gutter)-2) + "| "
	col := max(e.Column-1, 0)
	// Keep tabs as tabs so the caret lines up under them.
	var indent strings.Builder
	for i, r := range e.source {
		if i >= col {
			break
		}
		if r == '\t' {
			indent.WriteByte('\t')
		} else {
			indent.WriteByte(' ')
		}
	}
	return gutter + e.source + "\n" + pad + indent.String() + "^"
}

// Errors are every problem found in a suite, in file order. A suite with
// any of them does not run.
type Errors []*Error

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
		if x := e.Excerpt(); x != "" {
			b.WriteString("\n" + x)
		}
	}
	if len(es) > 1 {
		fmt.Fprintf(&b, "\n%d problems in %s", len(es), es[0].File)
	}
	return b.String()
}

// maxErrors caps how many problems one report lists: past that, the rest
// are usually echoes of the first.
const maxErrors = 20
