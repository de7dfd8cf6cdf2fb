package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// demoCases is a demo's shape: many cases on one backend, some names long,
// two of them alike for their first 31 characters.
func demoCases() []Case {
	base := fixedCases()
	race, safe := base[0], base[1]
	var cs []Case
	for _, n := range []struct {
		name string
		race bool
	}{
		{"memory-set (1 replica)", false},
		{"memory-set (3 replicas)", true},
		{"alert-dedupe (naive, 3 replicas, deploy)", true},
		{"alert-dedupe (claim in the store, 3 replicas, deploy)", false},
		{"reward-payout (external payment, response lost, retried)", true},
		{"reward-payout (external payment with idempotency key)", false},
	} {
		c := safe
		if n.race {
			c = race
		}
		c.Name, c.Scenario = n.name, strings.Fields(n.name)[0]
		cs = append(cs, c)
	}
	// One that did not meet its expectation, for the summary's last lines.
	bad := race
	bad.Name, bad.Scenario, bad.Expect = "check-then-write (for-update)", "check-then-write", Expect{Kind: "safe"}
	return append(cs, bad)
}

// At 80 and 120 columns every line fits, and the goldens pin the layouts:
// shorter headers, columns that leave, names cut apart.
func TestTableWidthGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		cases []Case
		o     Options
	}{
		{"table-80.golden", fixedCases(), Options{Timeline: true, Title: "racetest demo", Width: 80}},
		{"table-120.golden", fixedCases(), Options{Timeline: true, Title: "racetest demo", Width: 120}},
		{"demo-80.golden", demoCases(), Options{Timeline: true, Title: "racetest demo — 7 runs on memory, 3 attempts released together", Summary: true, Width: 80}},
		{"demo-120.golden", demoCases(), Options{Timeline: true, Title: "racetest demo — 7 runs on memory, 3 attempts released together", Summary: true, Width: 120}},
		{"demo-details-80.golden", demoCases(), Options{Timeline: true, Title: "racetest demo", Brief: true, TableLast: true, Width: 80}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var b bytes.Buffer
			if err := Table(&b, tc.cases, tc.o); err != nil {
				t.Fatal(err)
			}
			for i, l := range strings.Split(b.String(), "\n") {
				if n := utf8.RuneCountInString(l); n > tc.o.Width {
					t.Errorf("line %d is %d columns, wider than %d:\n%s", i+1, n, tc.o.Width, l)
				}
				if strings.TrimRight(l, " ") != l {
					t.Errorf("line %d ends in spaces: %q", i+1, l)
				}
			}
			golden(t, tc.file, b.Bytes())
		})
	}
}

func TestFitNamesKeepsRowsApart(t *testing.T) {
	names := []string{
		"reward-payout (external payment, response lost, retried)",
		"reward-payout (external payment with idempotency key)",
		"memory-set (1 replica)",
	}
	for _, w := range []int{12, 20, 30, 40} {
		got := fitNames(names, w)
		seen := map[string]bool{}
		for i, g := range got {
			if utf8.RuneCountInString(g) > w {
				t.Errorf("width %d: %q is longer", w, g)
			}
			if seen[g] {
				t.Errorf("width %d: two rows read %q", w, g)
			}
			seen[g] = true
			if utf8.RuneCountInString(names[i]) <= w && g != names[i] {
				t.Errorf("width %d: %q fits but was cut to %q", w, names[i], g)
			}
		}
	}
}

// The table counts the columns a colour code does not take: a coloured
// table lines up as the plain one does.
func TestColouredTableLinesUp(t *testing.T) {
	var plain, colour bytes.Buffer
	if err := Table(&plain, demoCases(), Options{Width: 80, Summary: true}); err != nil {
		t.Fatal(err)
	}
	if err := Table(&colour, demoCases(), Options{Width: 80, Summary: true, Color: true}); err != nil {
		t.Fatal(err)
	}
	strip := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] == '\x1b' {
				i += strings.IndexByte(s[i:], 'm')
				continue
			}
			b.WriteByte(s[i])
		}
		return b.String()
	}
	if got := strip(colour.String()); got != plain.String() {
		t.Errorf("the coloured table, uncoloured, differs from the plain one:\n%s\n---\n%s", got, plain.String())
	}
}
