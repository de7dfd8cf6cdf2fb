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
	whole.Title = "racetest suite ci.yaml" // the shards' own, when they agree
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

// Parts that say which part they are merge only as a whole set: each of
// 1..N once, of one suite, each with all its cases. A part missing (a CI
// job that died before writing it) would otherwise leave a merged report,
// and its exit code, that never ran that part's cases.
func TestMergeNeedsEveryPartWhole(t *testing.T) {
	whole := readTestdata(t)
	parts := func(n int) []Document {
		var ds []Document
		for k := 1; k <= n; k++ {
			d := whole
			d.Runs = nil
			for i, r := range whole.Runs {
				if i%n == k-1 {
					d.Runs = append(d.Runs, r)
				}
			}
			d.Shard = &ShardJSON{Suite: "ci.yaml", Digest: "abc", K: k, N: n, Cases: len(d.Runs)}
			ds = append(ds, d)
		}
		return ds
	}
	names := []string{"p1.json", "p2.json", "p3.json", "p4.json"}
	ds := parts(2)
	if got, err := Merge(ds, names); err != nil || len(got.Runs) != len(whole.Runs) {
		t.Fatalf("both parts of two: %d runs, %v; want %d", len(got.Runs), err, len(whole.Runs))
	}
	refused := func(what string, docs []Document, want string) {
		t.Helper()
		if _, err := Merge(docs, names); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", what, err, want)
		}
	}
	refused("part 2 of 2 missing", ds[:1], "shard 2/2 of ci.yaml is missing (1 of 2 parts given)")
	refused("part 1 of 2 missing", ds[1:], "shard 1/2 of ci.yaml is missing")
	three := parts(3)
	refused("two parts of three missing", three[:1], "shards 2/3, 3/3 of ci.yaml are missing")
	again := ds[1]
	again.Runs = append([]RunJSON(nil), ds[1].Runs...)
	again.Title = "the same part, run again"
	again.Runs[0].Name += " (again)"
	refused("a part twice", []Document{ds[0], ds[1], again}, "p2.json and p3.json are both shard 2/2 of ci.yaml")
	// ds[1] saying it is another part.
	as := func(suite, digest string, k, n int) Document {
		d := ds[1]
		d.Shard = &ShardJSON{Suite: suite, Digest: digest, K: k, N: n, Cases: len(d.Runs)}
		return d
	}
	refused("a part of another suite", []Document{ds[0], as("other.yaml", "def", 2, 2)}, "p2.json is shard 2/2 of other.yaml, p1.json is shard 1/2 of ci.yaml")
	refused("a part of another split", []Document{ds[0], as("ci.yaml", "abc", 2, 3)}, "not parts of one suite run")
	refused("a part beyond N", []Document{ds[0], as("ci.yaml", "abc", 3, 2)}, "says it is shard 3/2")
	refused("part 0", []Document{ds[0], as("ci.yaml", "abc", 0, 2)}, "says it is shard 0/2")
	plain := ds[1]
	plain.Shard = nil
	refused("a report that is no part", []Document{ds[0], plain}, "p2.json is not a part of a sharded suite run")
	refused("a report that is no part, first", []Document{plain, ds[0]}, "p1.json is not a part of a sharded suite run, p2.json is")
	if _, err := Merge([]Document{ds[0], plain}, names[:1]); err == nil || !strings.Contains(err.Error(), "report 2 is not a part of a sharded suite run, p1.json is") {
		t.Errorf("a report given no name: %v, want it called report 2", err)
	}
	cut := ds[1]
	cut.Runs = ds[1].Runs[:len(ds[1].Runs)-1]
	refused("a part cut short", []Document{ds[0], cut}, "p2.json holds 0 of the 1 cases of shard 2/2 of ci.yaml")
	// Reports that say nothing of parts (an older racetest's) merge as given.
	a, b := whole, whole
	a.Runs, b.Runs = whole.Runs[:1], whole.Runs[1:]
	if _, err := Merge([]Document{a, b}, names); err != nil {
		t.Errorf("reports with no part recorded: %v", err)
	}
}
