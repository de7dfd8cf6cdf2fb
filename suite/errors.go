package suite

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/racetest/racetest/internal/printable"
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

// The message and the excerpt are for a terminal: a message is cut at
// maxMsg bytes, and an excerpt shows excerptWidth characters of the line
// around the column.
const (
	maxMsg       = 600
	excerptWidth = 100
)

func (e *Error) Error() string {
	msg, _ := redactText(e.Msg, 0)
	if len(msg) > maxMsg {
		msg = strings.ToValidUTF8(msg[:maxMsg], "") + "…"
	}
	msg = printable.Text(msg)
	if e.Line == 0 {
		return e.File + ": " + msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, msg)
}

// Excerpt is the offending line with a caret under the column, for a
// person reading a terminal; empty when the line is unknown. A long line
// is cut to a window around the column, passwords are redacted, and
// control and bidi characters are shown as escapes.
func (e *Error) Excerpt() string {
	if e.Line == 0 || e.source == "" {
		return ""
	}
	// The column counts characters; find its byte offset.
	at, col := len(e.source), max(e.Column-1, 0)
	for i := range e.source {
		if col == 0 {
			at = i
			break
		}
		col--
	}
	line, at := redactText(e.source, at)
	start := at
	for n := 0; start > 0 && n < excerptWidth/2; n++ {
		_, size := utf8.DecodeLastRuneInString(line[:start])
		start -= size
	}
	var shown, indent strings.Builder
	if start > 0 {
		shown.WriteString("…")
		indent.WriteByte(' ')
	}
	n, i := 0, start
	for ; i < len(line) && n < excerptWidth; n++ {
		r, size := utf8.DecodeRuneInString(line[i:])
		text := printable.Rune(r)
		if r == '\t' {
			// Keep tabs as tabs so the caret lines up under them.
			text = "\t"
		} else if r == utf8.RuneError && size <= 1 {
			text = fmt.Sprintf(`\x%02x`, line[i])
		}
		if i < at {
			if r == '\t' {
				indent.WriteByte('\t')
			} else {
				indent.WriteString(strings.Repeat(" ", utf8.RuneCountInString(text)))
			}
		}
		shown.WriteString(text)
		i += size
	}
	if i < len(line) {
		shown.WriteString("…")
	}
	gutter := fmt.Sprintf("%5d | ", e.Line)
	pad := strings.Repeat(" ", len(gutter)-2) + "| "
	return gutter + shown.String() + "\n" + pad + indent.String() + "^"
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
