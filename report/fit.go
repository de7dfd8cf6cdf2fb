package report

import (
	"io"
	"strings"
	"unicode/utf8"
)

// column is one column of the table, with a long and a short header.
type column struct {
	long, short string
	cells       []string
	// drop orders the columns that may leave a narrow table: 1 leaves
	// first; 0 never leaves.
	drop int
	// free: the column says nothing a line under the table does not (one
	// backend for every row); it leaves before any name is cut.
	free bool
}

// Names are cut no shorter than this while some column could still leave,
// and never shorter than minName.
const (
	softName = 30
	minName  = 12
	colGap   = 2
)

// fitColumns makes the table fit width: long headers if they fit, else
// short ones; then columns leave in their drop order while the first
// column (the names) would have to be cut below softName; then the names
// are cut, down to minName. It returns the columns to print, the first
// column's width, and the headers of the columns that left.
func fitColumns(cols []column, width int) (kept []column, nameW int, left []string) {
	need := func(cs []column, short bool) (total, name int) {
		for i, c := range cs {
			w := visibleLen(c.long)
			if short {
				w = visibleLen(c.short)
			}
			for _, cell := range c.cells {
				w = max(w, visibleLen(cell))
			}
			if i == 0 {
				name = w
			}
			total += w
		}
		return total + colGap*(len(cs)-1), name
	}
	if total, name := need(cols, false); total <= width {
		return cols, name, nil
	}
	for i := range cols {
		cols[i].long = cols[i].short
	}
	kept = cols
	for {
		total, name := need(kept, true)
		if total <= width {
			return kept, name, left
		}
		cut := total - width
		next := -1
		for i, c := range kept {
			if c.free {
				next = i
			}
		}
		if next < 0 && name-cut >= min(softName, name) {
			return kept, name - cut, left
		}
		for i, c := range kept {
			if next < 0 && c.drop > 0 || next >= 0 && !kept[next].free && c.drop > 0 && c.drop < kept[next].drop {
				next = i
			}
		}
		if next < 0 {
			return kept, max(name-cut, minName), left
		}
		left = append(left, kept[next].short)
		kept = append(append([]column(nil), kept[:next]...), kept[next+1:]...)
	}
}

// writeColumns prints the header and the rows, each padded to its column;
// the first column's cells are cut to nameW, keeping them distinct.
func writeColumns(w io.Writer, cols []column, nameW int, header func(string) string) {
	names := fitNames(cols[0].cells, nameW)
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = visibleLen(c.long)
		for _, cell := range c.cells {
			widths[i] = max(widths[i], visibleLen(cell))
		}
	}
	widths[0] = nameW
	line := func(cell func(i int) string) {
		var b strings.Builder
		for i := range cols {
			s := cell(i)
			b.WriteString(s)
			if i < len(cols)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-visibleLen(s)+colGap))
			}
		}
		io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n")
	}
	line(func(i int) string { return header(cols[i].long) })
	for r := range names {
		line(func(i int) string {
			if i == 0 {
				return names[r]
			}
			return cols[i].cells[r]
		})
	}
}

// fitNames cuts names longer than width with an ellipsis at the end; where
// two cut names would read the same, the cut moves to the middle, keeping
// each name's end, so that no two rows look alike.
func fitNames(names []string, width int) []string {
	out := make([]string, len(names))
	seen := map[string]string{}
	clash := map[string]bool{}
	for i, n := range names {
		out[i] = cutEnd(n, width)
		if full, ok := seen[out[i]]; ok && full != n {
			clash[out[i]] = true
		}
		seen[out[i]] = n
	}
	for i, n := range names {
		if clash[out[i]] {
			out[i] = cutMiddle(n, width)
		}
	}
	return out
}

func cutEnd(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// cutMiddle keeps the start (the scenario's name) and the end (what tells
// one variant from another).
func cutMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := (n - 1) / 2
	tail := n - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// visibleLen counts the columns s takes on a terminal: runes, less ANSI
// colour codes.
func visibleLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == '\x1b' {
			if j := strings.IndexByte(s[i:], 'm'); j >= 0 {
				i += j + 1
				continue
			}
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return n
}

// wrapText folds s into lines of at most width columns, the first line
// starting with first and the rest with rest (a hanging indent). A word
// longer than a line stays whole.
func wrapText(s string, width int, first, rest string) []string {
	var lines []string
	line := first
	empty := true
	for _, word := range strings.Fields(s) {
		if !empty && visibleLen(line)+1+visibleLen(word) > width {
			lines = append(lines, line)
			line, empty = rest, true
		}
		if !empty {
			line += " "
		}
		line += word
		empty = false
	}
	return append(lines, line)
}
