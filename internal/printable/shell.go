package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Shell quotes s as one word of a POSIX shell command line, so that a
// command printed for a person to paste (a report's Reproduce line) runs
// as printed: a plain word as it is, anything else in single quotes, and
// a word with control characters (a newline in a case's name) in bash's
// $'…', where each is an escape and nothing breaks the line.
func Shell(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !plainWord(r) }) < 0 {
		return s
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) < 0 {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			// A byte that is not UTF-8: as the byte it is.
			fmt.Fprintf(&b, `\x%02x`, s[i])
			i++
			continue
		}
		i += size
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case unicode.IsControl(r):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// ShellLine is words quoted with Shell and joined by spaces.
func ShellLine(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Shell(w)
	}
	return strings.Join(q, " ")
}

// plainWord reports whether r needs no quoting in a shell word: ASCII
// letters, digits and a few marks, and any printable letter or symbol
// beyond ASCII ("200µs"), which no shell treats specially.
func plainWord(r rune) bool {
	if r >= utf8.RuneSelf {
		return r != utf8.RuneError && unicode.IsPrint(r) && !unicode.IsSpace(r)
	}
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)
}
