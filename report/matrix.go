package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/racetest/racetest/runner"
)

// A matrix lays cases out as the Hermitage tables do: per backend one
// table, a row per scenario and variant, a column per isolation level, each
// cell the verdict held to the catalog's expectation for that server. The
// cases say where they belong through their settings "isolation" and
// "variant"; rows and columns keep the order in which the cases come.

// MatrixTable is one backend's table.
type MatrixTable struct {
	Backend string
	// Server is the server every cell measured ("" when none answered, or
	// the cells disagree).
	Server string
	// Settings are the server's settings that change outcomes, as the
	// cells' notes name them (MariaDB's innodb_snapshot_isolation,
	// PostgreSQL running read uncommitted as read committed).
	Settings   []string
	Isolations []string
	Rows       []MatrixRow
}

// MatrixRow is one scenario and variant; Cells holds, per isolation level,
// the index of its case (-1 where none ran).
type MatrixRow struct {
	Scenario, Variant string
	Cells             []int
}

// settingMarkers pick, among a backend's notes, those that name a server
// setting (or a server's mapping of a level) that changes a matrix's
// outcomes. The backends write these notes (mysqlstore, pgstore).
var settingMarkers = []string{"innodb_snapshot_isolation", "READ UNCOMMITTED behaves as READ COMMITTED"}

// Matrix groups cases into one table per backend, in the order they come.
func Matrix(cases []Case) []MatrixTable {
	var tables []MatrixTable
	at := map[string]int{}
	servers := map[string][]string{}
	for i, c := range cases {
		ti, ok := at[c.Backend]
		if !ok {
			ti = len(tables)
			at[c.Backend] = ti
			tables = append(tables, MatrixTable{Backend: c.Backend})
		}
		t := &tables[ti]
		iso := c.Settings["isolation"]
		col := slices.Index(t.Isolations, iso)
		if col < 0 {
			col = len(t.Isolations)
			t.Isolations = append(t.Isolations, iso)
			for r := range t.Rows {
				t.Rows[r].Cells = append(t.Rows[r].Cells, -1)
			}
		}
		variant := c.Settings["variant"]
		row := slices.IndexFunc(t.Rows, func(r MatrixRow) bool { return r.Scenario == c.Scenario && r.Variant == variant })
		if row < 0 {
			row = len(t.Rows)
			cells := make([]int, len(t.Isolations))
			for j := range cells {
				cells[j] = -1
			}
			t.Rows = append(t.Rows, MatrixRow{Scenario: c.Scenario, Variant: variant, Cells: cells})
		}
		t.Rows[row].Cells[col] = i
		if r := c.Result; r != nil {
			if r.Server != "" && !slices.Contains(servers[c.Backend], r.Server) {
				servers[c.Backend] = append(servers[c.Backend], r.Server)
			}
			for _, n := range r.Notes {
				if strings.HasPrefix(n, CatalogNotePrefix) {
					continue // the catalog's reason for a cell, not the server's setting
				}
				n = strings.TrimPrefix(n, c.Backend+": ")
				if slices.ContainsFunc(settingMarkers, func(m string) bool { return strings.Contains(n, m) }) && !slices.Contains(t.Settings, n) {
					t.Settings = append(t.Settings, n)
				}
			}
		}
	}
	for i := range tables {
		if s := servers[tables[i].Backend]; len(s) == 1 {
			tables[i].Server = s[0]
		}
	}
	return tables
}

// Conflicts counts the attempts the server refused with a conflict
// (serialization failure, deadlock) over a case's bursts.
func Conflicts(c Case) int {
	if c.Result == nil {
		return 0
	}
	return c.Result.Outcomes()[runner.Conflict]
}

// cellStyle is how much a matrix cell says: the conflicts in full, as a
// count with a "c", or not at all (a narrow terminal).
type cellStyle int

const (
	conflictsFull cellStyle = iota
	conflictsShort
	conflictsNone
)

// matrixCell is a cell's text: "RACE 97%", "SAFE ≤3% · 1391 conflicts",
// marked ✗ where the verdict is not the catalog's.
func matrixCell(c Case, a Assessment, style cellStyle) string {
	s := verdictCell(a)
	if n := Conflicts(c); n > 0 {
		switch style {
		case conflictsFull:
			s += " · " + plural(n, "conflict")
		case conflictsShort:
			s += fmt.Sprintf(" · %dc", n)
		}
	}
	if !a.Met && a.Verdict != Errored {
		s = "✗ " + s
	}
	return s
}

// levelShort are the isolation levels as the Hermitage tables abbreviate them.
var levelShort = map[string]string{
	"read-uncommitted": "RU", "read-committed": "RC", "repeatable-read": "RR", "serializable": "SER", "": "default",
}

func levelHeader(l string, short bool) string {
	if l == "" {
		return "server default"
	}
	if s, ok := levelShort[l]; ok && short {
		return s
	}
	return l
}

// matrixText writes the matrix for a terminal: each backend's table fitted
// to width (long headers, then the Hermitage abbreviations, then shorter
// conflict counts, then none), the cells that missed the catalog, why, and
// the errors.
func matrixText(w io.Writer, cases []Case, o Options) {
	paint := func(code, s string) string {
		if !o.Color {
			return s
		}
		return code + s + ansiReset
	}
	width := o.Width
	if width <= 0 {
		width = DefaultWidth
	}
	as := make([]Assessment, len(cases))
	for i, c := range cases {
		as[i] = Assess(c)
	}
	if o.Title != "" {
		for _, l := range wrapText(o.Title, width, "", "") {
			fmt.Fprintln(w, paint(ansiBold, l))
		}
	}
	tables := Matrix(cases)
	short, style := fitMatrix(tables, cases, as, width)
	conflictsShown := false
	for _, t := range tables {
		fmt.Fprintln(w)
		head := t.Backend
		if t.Server != "" {
			head += " — " + t.Server
		}
		fmt.Fprintln(w, paint(ansiBold, head))
		for _, s := range t.Settings {
			for _, l := range wrapText(s, width, "  ", "    ") {
				fmt.Fprintln(w, l)
			}
		}
		fmt.Fprintln(w)
		writeMatrix(w, t, cases, as, short, style, paint)
		for _, r := range t.Rows {
			for _, i := range r.Cells {
				conflictsShown = conflictsShown || i >= 0 && style != conflictsNone && Conflicts(cases[i]) > 0
			}
		}
	}
	fmt.Fprintln(w)
	legend := "Each cell: the verdict over its bursts — RACE with the share of bursts over the limit, SAFE with the 95% upper bound on that share"
	if conflictsShown {
		legend += ", and the attempts the server refused with a conflict (serialization failure or deadlock)"
	}
	legend += ". ✗: not the catalog's expectation for this server."
	if short {
		legend += " RU read uncommitted, RC read committed, RR repeatable read, SER serializable."
	}
	if style == conflictsShort {
		legend += " 12c: 12 conflicts."
	}
	if style == conflictsNone {
		legend += fmt.Sprintf(" Conflict counts left out at %d columns; --format json has them.", width)
	}
	for _, l := range wrapText(legend, width, "", "") {
		fmt.Fprintln(w, l)
	}
	var lines []string
	errored := map[string][]int{} // backend and error → its cells
	var errKeys []string
	for i, c := range cases {
		a := as[i]
		switch {
		case a.Verdict == Errored:
			k := c.Backend + "\x00" + a.Why
			if _, ok := errored[k]; !ok {
				errKeys = append(errKeys, k)
			}
			errored[k] = append(errored[k], i)
		case !a.Met:
			lines = append(lines, paint(ansiRed, "✗")+" "+matrixWhy(c, a))
		}
	}
	for _, k := range errKeys {
		is := errored[k]
		c, a := cases[is[0]], as[is[0]]
		what := fmt.Sprintf("%s %s at %s did not run", c.Backend, rowName(c.Scenario, c.Settings["variant"]), levelHeader(c.Settings["isolation"], false))
		if len(is) > 1 {
			what = fmt.Sprintf("%s: %d cells did not run", c.Backend, len(is))
		}
		lines = append(lines, paint(ansiRed, "ERROR")+" "+what+": "+a.Why)
	}
	if len(lines) > 0 {
		fmt.Fprintln(w)
	}
	for _, line := range lines {
		for _, l := range wrapText(line, width, "", "  ") {
			fmt.Fprintln(w, l)
		}
	}
}

// matrixWhy says in one line which cell missed, and why: the verdict, the
// expectation, and the catalog's reason for it.
func matrixWhy(c Case, a Assessment) string {
	where := fmt.Sprintf("%s %s at %s", c.Backend, rowName(c.Scenario, c.Settings["variant"]), levelHeader(c.Settings["isolation"], false))
	why := a.Why
	if why == "" {
		why = fmt.Sprintf("%s, expected %s", verdictCell(a), strings.ToUpper(c.Expect.String()))
	}
	s := where + ": " + why
	if cw := catalogWhy(c); cw != "" {
		s += "; the catalog " + cw
	}
	return s
}

// catalogWhy is the catalog's reason for a case's expectation, from its note.
func catalogWhy(c Case) string {
	for _, n := range notesOf(c) {
		if s, ok := strings.CutPrefix(n, CatalogNotePrefix); ok {
			return s
		}
	}
	return ""
}

func rowName(scenario, variant string) string {
	if variant == "" {
		return scenario
	}
	return scenario + " " + variant
}

// variantLabel is a row's label under its scenario: the variant, or
// "default" for a default without a name of its own.
func variantLabel(v string) string {
	if v == "" {
		return "  default"
	}
	return "  " + v
}

// fitMatrix picks the widest layout in which every table fits width: the
// tables of one matrix read alike.
func fitMatrix(tables []MatrixTable, cases []Case, as []Assessment, width int) (short bool, style cellStyle) {
	for _, try := range []struct {
		short bool
		style cellStyle
	}{{false, conflictsFull}, {true, conflictsFull}, {true, conflictsShort}, {true, conflictsNone}} {
		fits := true
		for _, t := range tables {
			fits = fits && matrixWidth(t, cases, as, try.short, try.style) <= width
		}
		if fits {
			return try.short, try.style
		}
	}
	return true, conflictsNone
}

func matrixWidths(t MatrixTable, cases []Case, as []Assessment, short bool, style cellStyle) []int {
	widths := make([]int, len(t.Isolations)+1)
	for _, r := range t.Rows {
		widths[0] = max(widths[0], visibleLen(variantLabel(r.Variant)))
		for j, i := range r.Cells {
			if i >= 0 {
				widths[j+1] = max(widths[j+1], visibleLen(matrixCell(cases[i], as[i], style)))
			}
		}
	}
	for j, l := range t.Isolations {
		widths[j+1] = max(widths[j+1], visibleLen(levelHeader(l, short)))
	}
	return widths
}

func matrixWidth(t MatrixTable, cases []Case, as []Assessment, short bool, style cellStyle) int {
	total := 0
	for _, w := range matrixWidths(t, cases, as, short, style) {
		total += w
	}
	return total + colGap*len(t.Isolations)
}

func writeMatrix(w io.Writer, t MatrixTable, cases []Case, as []Assessment, short bool, style cellStyle, paint func(string, string) string) {
	widths := matrixWidths(t, cases, as, short, style)
	line := func(cells []string) {
		var b strings.Builder
		for j, s := range cells {
			b.WriteString(s)
			if j < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[j]-visibleLen(s)+colGap))
			}
		}
		io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n")
	}
	head := []string{""}
	for _, l := range t.Isolations {
		head = append(head, levelHeader(l, short))
	}
	line(head)
	scenario := ""
	for _, r := range t.Rows {
		if r.Scenario != scenario {
			scenario = r.Scenario
			fmt.Fprintln(w, scenario)
		}
		cells := []string{variantLabel(r.Variant)}
		for _, i := range r.Cells {
			if i < 0 {
				cells = append(cells, "–")
				continue
			}
			text := matrixCell(cases[i], as[i], style)
			color := verdictColor(as[i].Verdict)
			if !as[i].Met {
				color = ansiRed + ansiBold
			}
			cells = append(cells, paint(color, text))
		}
		line(cells)
	}
}
