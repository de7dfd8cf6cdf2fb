package report

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func readTestdata(t *testing.T) Document {
	t.Helper()
	data, err := os.ReadFile("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ReadDocument(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Runs) < 2 {
		t.Fatalf("testdata/report.json has %d runs: the test needs two or more", len(d.Runs))
	}
	return d
}

// Shards merged give the runs of one report, each once, in order; the
// verdicts are assessed again from the same figures.
func TestMergeJoinsShards(t *testing.T) {
	whole := readTestdata(t)
	a, b := whole, whole
	a.Runs, b.Runs = whole.Runs[:1], whole.Runs[1:]
	got, err := Merge([]Document{a, b}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Schema != whole.Schema || got.Version != whole.Version || got.Title != whole.Title {
		t.Errorf("merged header %q %q %q, want %q %q %q", got.Schema, got.Version, got.Title, whole.Schema, whole.Version, whole.Title)
	}
	if len(got.Runs) != len(whole.Runs) {
		t.Fatalf("merged %d runs, want %d", len(got.Runs), len(whole.Runs))
	}
	for i := range got.Runs {
		if got.Runs[i].Name != whole.Runs[i].Name || got.Runs[i].Verdict != whole.Runs[i].Verdict {
			t.Errorf("run %d: %s %s, want %s %s", i, got.Runs[i].Name, got.Runs[i].Verdict, whole.Runs[i].Name, whole.Runs[i].Verdict)
		}
	}
	cases, err := got.Cases()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if v := Assess(c).Verdict; v != whole.Runs[i].Verdict {
			t.Errorf("%s: assessed %s after the merge, recorded %s", c.Name, v, whole.Runs[i].Verdict)
		}
	}
	// Titles that differ are not any one shard's.
	b.Title = "another"
	if got, err := Merge([]Document{a, b}, []string{"a.json", "b.json"}); err != nil || got.Title != "" {
		t.Errorf("titles %q and %q merged as %q (%v)", a.Title, b.Title, got.Title, err)
	}
}

// The same report twice, a matrix, or another schema is refused with the
// file named.
func TestMergeRefuses(t *testing.T) {
	whole := readTestdata(t)
	if _, err := Merge([]Document{whole, whole}, []string{"a.json", "b.json"}); err == nil || !strings.Contains(err.Error(), "b.json holds run") {
		t.Errorf("the same report twice: %v", err)
	}
	m := whole
	m.Matrix = []MatrixJSON{{Backend: "mysql"}}
	if _, err := Merge([]Document{whole, m}, []string{"a.json", "m.json"}); err == nil || !strings.Contains(err.Error(), "m.json is a matrix report") {
		t.Errorf("a matrix report: %v", err)
	}
	o := whole
	o.Runs = nil
	o.Schema = "racetest/0"
	if _, err := Merge([]Document{whole, o}, []string{"a.json", "o.json"}); err == nil || !strings.Contains(err.Error(), "o.json has schema") {
		t.Errorf("another schema: %v", err)
	}
	if _, err := Merge(nil, nil); err == nil {
		t.Error("nothing to merge was accepted")
	}
}

// A Reproduce line is one Markdown code span whatever it holds: a backtick
// in a case's name does not end it, and a newline was already made an
// escape by the shell quoting.
func TestMarkdownCodeSpanHoldsAnyCommand(t *testing.T) {
	for in, want := range map[string]string{
		"racetest run x":                "`racetest run x`",
		"racetest suite f --case 'a`b'": "``racetest suite f --case 'a`b'``",
		"`x``":                          "``` `x`` ```",
	} {
		if got := mdCode(in); got != want {
			t.Errorf("mdCode(%q) = %s, want %s", in, got, want)
		}
	}
}
