// Package printable makes user text safe to print to a terminal or a log:
// control characters, NUL, invalid UTF-8 and the invisible characters that
// reorder or hide text (bidi overrides, isolates, marks) become visible
// escapes, so that a case name cannot rewrite a log line or hide what it is.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line returns s as one line: every line break and tab is escaped too.
func Line(s string) string { return escape(s, false) }

// Text returns s with its line breaks and tabs kept, for a multi-line
// message.
func Text(s string) string { return escape(s, true) }

// Rune returns how r is shown: r itself, or its escape.
func Rune(r rune) string {
	if safe(r) {
		return string(r)
	}
	if r < 0x80 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

func escape(s string, keepBreaks bool) string {
	if clean(s, keepBreaks) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepBreaks && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		default:
			b.WriteString(Rune(r))
		}
		i += n
	}
	return b.String()
}

func clean(s string, keepBreaks bool) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return false
			}
		}
		if !safe(r) && !(keepBreaks && (r == '\n' || r == '\t')) {
			return false
		}
	}
	return true
}

// safe reports whether r can be printed as it is: not a control
// character, not a format character (bidi controls, zero-width marks)
// except the zero-width joiner of emoji sequences, not a line or paragraph
// separator.
func safe(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return false
	case r < 0x7f:
		return true
	case r == 0x200d:
		return true
	}
	return !unicode.IsControl(r) && !unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}
