package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/racetest/racetest/runner"
)

// matrixResult is a run of 20 bursts of 8 attempts: over of them left two
// effects, and conflicts attempts per burst were refused with a conflict.
func matrixResult(over, conflicts int, server string, notes ...string) *runner.Result {
	r := &runner.Result{Attempts: 8, Replicas: 1, Waves: 1, Allowed: 1, Required: 1, Planned: 20,
		Errors: map[string]int{}, Server: server, Notes: notes}
	for i := range 20 {
		effects := 1
		if i < over {
			effects = 2
		}
		var out [runner.NumClasses]int
		out[runner.Executed], out[runner.Conflict], out[runner.Declined] = effects, conflicts, 8-effects-conflicts
		r.Bursts = append(r.Bursts, runner.Burst{Index: i, Effects: effects, Allowed: 1, Required: 1, Outcomes: out, Overlap: 8})
	}
	return r
}

// matrixCases is a matrix of two backends, two rows and four levels, as
// 'racetest matrix' builds it: check-then-write races below serializable;
// for-update is safe from repeatable-read on mysql, but one cell (mysql,
// for-update, repeatable-read) raced against the catalog, and one cell
// (postgres, for-update, read-uncommitted) could not run.
func matrixCases() []Case {
	const snapshot = "mysql: MariaDB innodb_snapshot_isolation=OFF (ON: REPEATABLE READ refuses to write a row changed since its snapshot; OFF: it writes over it)"
	const ru = "postgres: READ UNCOMMITTED behaves as READ COMMITTED in PostgreSQL (no dirty reads)"
	var cs []Case
	for _, b := range []struct{ backend, server, note string }{
		{"mysql", "MariaDB 10.11.19", snapshot}, {"postgres", "PostgreSQL 15.20", ""},
	} {
		for _, variant := range []string{"plain", "for-update"} {
			for _, level := range []string{"read-uncommitted", "read-committed", "repeatable-read", "serializable"} {
				var notes []string
				if b.note != "" {
					notes = append(notes, b.note)
				}
				if b.backend == "postgres" && level == "read-uncommitted" {
					notes = append(notes, ru)
				}
				safe := level == "serializable" || b.backend == "mysql" && variant == "for-update" && level == "repeatable-read"
				over, conflicts := 19, 0
				if safe {
					over, conflicts = 0, 7
				}
				expect := Expect{Kind: ExpectRace}
				if safe {
					expect = Expect{Kind: ExpectSafe}
					notes = append(notes, CatalogNotePrefix+"expects SAFE here: the server stops all but one")
					if b.backend == "mysql" {
						// Names the setting, but is the catalog's reason, not the server's setting.
						notes = append(notes, CatalogNotePrefix+"expects SAFE here: whatever innodb_snapshot_isolation says")
					}
				}
				if b.backend == "mysql" && variant == "for-update" && level == "repeatable-read" {
					over, conflicts = 1, 3 // the mismatch
				}
				settings := map[string]string{"isolation": level, "variant": variant}
				name := "check-then-write (" + variant + ", " + level + ")"
				c := Case{Name: name, Scenario: "check-then-write", Backend: b.backend, Expect: expect, Strict: true,
					Settings: settings, Result: matrixResult(over, conflicts, b.server, notes...)}
				if b.backend == "postgres" && variant == "for-update" && level == "read-uncommitted" {
					c.Result, c.Err = nil, errTest("postgres: cannot connect to 127.0.0.1:5432 (connection refused)")
				}
				cs = append(cs, c)
			}
		}
	}
	return cs
}

type errTest string

func (e errTest) Error() string { return string(e) }

// At 80 and 120 columns every line fits, and the goldens pin the layout:
// full headers and conflict counts where they fit, the Hermitage
// abbreviations, then no conflict counts (said under the table).
func TestMatrixGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		width int
	}{{"matrix-80.golden", 80}, {"matrix-120.golden", 120}} {
		t.Run(tc.file, func(t *testing.T) {
			var b bytes.Buffer
			o := Options{Matrix: true, Width: tc.width, Title: "racetest matrix — 8 attempts × 20 bursts per cell"}
			if err := Table(&b, matrixCases(), o); err != nil {
				t.Fatal(err)
			}
			for i, l := range strings.Split(b.String(), "\n") {
				if n := utf8.RuneCountInString(l); n > tc.width {
					t.Errorf("line %d is %d columns, wider than %d: %q", i+1, n, tc.width, l)
				}
			}
			golden(t, tc.file, b.Bytes())
		})
	}
}

func TestMatrixLayout(t *testing.T) {
	cs := matrixCases()
	tables := Matrix(cs)
	if len(tables) != 2 || tables[0].Backend != "mysql" || tables[1].Backend != "postgres" {
		t.Fatalf("want a table for mysql then postgres, got %+v", tables)
	}
	my, pg := tables[0], tables[1]
	if my.Server != "MariaDB 10.11.19" || len(my.Settings) != 1 || !strings.HasPrefix(my.Settings[0], "MariaDB innodb_snapshot_isolation=OFF") {
		t.Errorf("mysql's table names server %q and settings %q", my.Server, my.Settings)
	}
	if len(pg.Settings) != 1 || !strings.Contains(pg.Settings[0], "READ UNCOMMITTED behaves as READ COMMITTED") {
		t.Errorf("postgres's table must say read uncommitted runs as read committed, got %q", pg.Settings)
	}
	if len(my.Rows) != 2 || my.Rows[1].Variant != "for-update" || len(my.Isolations) != 4 || my.Isolations[3] != "serializable" {
		t.Fatalf("mysql's rows %+v, columns %q", my.Rows, my.Isolations)
	}
	// Row for-update, column repeatable-read is case 6 (0-based).
	if got := my.Rows[1].Cells[2]; got != 6 {
		t.Errorf("mysql for-update at repeatable-read is case %d, want 6", got)
	}
	a := Assess(cs[6])
	if a.Met || a.Verdict != Race {
		t.Fatalf("the mismatch cell assessed %s, met %v", a.Verdict, a.Met)
	}
	if got := matrixCell(cs[6], a, conflictsFull); got != "✗ RACE 5.0% · 60 conflicts" {
		t.Errorf("mismatch cell reads %q", got)
	}
	if got := matrixCell(cs[3], Assess(cs[3]), conflictsFull); got != "SAFE ≤14% · 140 conflicts" {
		t.Errorf("serializable cell reads %q", got)
	}
	if got := matrixCell(cs[3], Assess(cs[3]), conflictsNone); got != "SAFE ≤14%" {
		t.Errorf("serializable cell without conflicts reads %q", got)
	}
}

func TestMatrixJSON(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, matrixCases(), Options{Matrix: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	var doc Document
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 16 || len(doc.Matrix) != 2 {
		t.Fatalf("%d runs and %d matrix tables, want 16 and 2", len(doc.Runs), len(doc.Matrix))
	}
	cell := doc.Matrix[0].Rows[1].Cells[2]
	want := MatrixCellJSON{Isolation: "repeatable-read", Run: 6, Verdict: Race, Expect: "safe", ExpectationMet: false,
		Violations: 1, Bursts: 20, UpperBound95: cell.UpperBound95, Conflicts: 60, Cell: "✗ RACE 5.0% · 60 conflicts"}
	if cell != want || cell.UpperBound95 <= 0.05 {
		t.Errorf("mysql for-update repeatable-read:\n got %+v\nwant %+v", cell, want)
	}
	if doc.Runs[cell.Run].Settings["isolation"] != "repeatable-read" || doc.Runs[cell.Run].Settings["variant"] != "for-update" {
		t.Errorf("the cell's run index points at %+v", doc.Runs[cell.Run].Settings)
	}
	if err := JSON(&b, matrixCases(), Options{}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b.Bytes()[bytes.Index(b.Bytes(), []byte("}\n{"))+2:], []byte(`"matrix"`)) {
		t.Error("a report that is not a matrix has a matrix section")
	}
}

func TestMatrixMarkdownAndHTML(t *testing.T) {
	var md bytes.Buffer
	if err := Markdown(&md, matrixCases(), Options{Matrix: true, Title: "racetest matrix"}); err != nil {
		t.Fatal(err)
	}
	golden(t, "matrix.md", md.Bytes())
	var page bytes.Buffer
	if err := HTML(&page, matrixCases(), Options{Matrix: true, Title: "racetest matrix"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<h2>mysql <small>MariaDB 10.11.19</small></h2>`,
		`<th>read-uncommitted</th><th>read-committed</th><th>repeatable-read</th><th>serializable</th>`,
		`<a class="verdict v-race" href="#case-7">RACE 5.0% · 60 conflicts</a> <span class="bad" title="the catalog expects SAFE here">✗ expected SAFE</span>`,
		`<li>READ UNCOMMITTED behaves as READ COMMITTED in PostgreSQL (no dirty reads)</li>`,
		`id="case-16"`,
	} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the HTML page lacks %s", want)
		}
	}
}
