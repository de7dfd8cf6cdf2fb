package report

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixedCases is a synthetic report: every figure is fixed so that the
// golden files pin the formats, not the machine's timing. The bursts differ
// on purpose: in the race, the worst burst (3) is not the median (2) and one
// burst never overlapped, so a rate over the wrong bursts or a summary of
// the wrong one changes the files; the safe run rests on 2 tested bursts of 3.
func fixedCases() []Case {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	race := &runner.Result{
		Attempts: 3, Replicas: 1, Waves: 1, Allowed: 1, Required: 1, Planned: 4,
		Bursts: []runner.Burst{
			{Index: 0, Effects: 3, Allowed: 1, Required: 1, Outcomes: [runner.NumClasses]int{3, 0, 0, 0, 0}, Spread: us(12), Overlap: 3},
			{Index: 1, Effects: 2, Allowed: 1, Required: 1, Outcomes: [runner.NumClasses]int{2, 1, 0, 0, 0}, Spread: us(20), Overlap: 3},
			{Index: 2, Effects: 1, Allowed: 1, Required: 1, Outcomes: [runner.NumClasses]int{1, 2, 0, 0, 0}, Spread: us(9), Overlap: 1},
			{Index: 3, Effects: 2, Allowed: 1, Required: 1, Outcomes: [runner.NumClasses]int{2, 1, 0, 0, 0}, Spread: us(15), Overlap: 2},
		},
		Example: &runner.Trace{Burst: 0, Effects: 3, Allowed: 1, Workers: []runner.WorkerTrace{
			{Worker: 0, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: 0}, {Name: "check", At: us(2)}, {Name: "act", At: us(210)}, {Name: "done", At: us(415)}}},
			{Worker: 1, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: us(5)}, {Name: "check", At: us(6)}, {Name: "act", At: us(212)}, {Name: "done", At: us(420)}}},
			{Worker: 2, Outcome: runner.Executed, Marks: []runner.Mark{{Name: "released", At: us(12)}, {Name: "check", At: us(14)}, {Name: "act", At: us(220)}, {Name: "done", At: us(430)}}},
		}},
		Errors:  map[string]int{},
		Server:  "Example DB 1.0",
		Notes:   []string{"memory: every store operation takes a simulated round trip of 200µs (--latency)"},
		Elapsed: 5 * time.Millisecond,
	}
	safe := &runner.Result{
		Attempts: 3, Replicas: 1, Waves: 1, Allowed: 1, Required: 1, Planned: 3,
		Bursts: []runner.Burst{
			{Index: 0, Effects: 1, Allowed: 1, Required: 1, Outcomes: [runner.NumClasses]int{1, 1, 0, 1, 0}, Spread: us(8), Overlap: 3},
			{Index: 1, Effects: 1, Allowed: 1, Required: 1, Outcomes: [runner.NumClasses]int{1, 2, 0, 0, 0}, Spread: us(10), Overlap: 2},
			{Index: 2, Effects: 1, Allowed: 1, Required: 1, Outcomes: [runner.NumClasses]int{1, 2, 0, 0, 0}, Spread: us(31), Overlap: 1},
		},
		Errors:  map[string]int{"connection reset by peer": 1},
		Checks:  []runner.Check{{Name: "lease liveness", OK: true, Detail: "granted after 51ms (TTL 50ms)"}},
		Notes:   []string{"memory: every store operation takes a simulated round trip of 200µs (--latency)"},
		Elapsed: 2 * time.Millisecond,
	}
	return []Case{
		{Name: "check-then-write", Scenario: "check-then-write", Backend: "memory", Lesson: "read, then write if free",
			Expect: Expect{Kind: "race"}, Settings: map[string]string{"latency": "200µs"}, Result: race},
		{Name: "ttl-lease", Scenario: "ttl-lease", Backend: "memory", Lesson: "one holder at a time",
			Expect: Expect{Kind: "safe"}, Result: safe},
		{Name: "unique-insert", Scenario: "unique-insert", Backend: "mysql", Expect: Expect{Kind: "safe"},
			Err: errors.New("mysql: cannot connect to 127.0.0.1:3306 (connection refused)")},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test ./report -update if the change is intended):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestGoldenFormats pins every registered format with its golden file:
// a new format without one fails here.
func TestGoldenFormats(t *testing.T) {
	inputs := map[string]struct {
		cases []Case
		o     Options
	}{
		"table":    {fixedCases(), Options{Timeline: true, Title: "racetest demo"}},
		"json":     {fixedCases(), Options{Version: "test"}},
		"html":     {fixedCases(), Options{Version: "test", Title: "racetest demo"}},
		"junit":    {suiteCases(), Options{Version: "test", Title: "racetest suite catalog.yaml"}},
		"markdown": {suiteCases(), Options{Version: "test", Title: "racetest suite catalog.yaml"}},
	}
	for _, f := range AllFormats() {
		t.Run(f.Name, func(t *testing.T) {
			in, ok := inputs[f.Name]
			if !ok || f.Golden == "" || f.Run == nil || f.Explore == nil {
				t.Fatalf("format %s: golden file %q, input given %v: a format renders runs and explorations, and a golden file pins it", f.Name, f.Golden, ok)
			}
			var b bytes.Buffer
			if err := f.Run(&b, in.cases, in.o); err != nil {
				t.Fatal(err)
			}
			golden(t, f.Golden, b.Bytes())
		})
	}
}

func TestTableColourOnlyWhenAsked(t *testing.T) {
	var plain, colour bytes.Buffer
	if err := Table(&plain, fixedCases(), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Table(&colour, fixedCases(), Options{Color: true}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Bytes(), []byte("\x1b[")) {
		t.Error("plain table contains ANSI escapes")
	}
	if !bytes.Contains(colour.Bytes(), []byte(ansiRed)) {
		t.Error("coloured table has no colour")
	}
}

func TestAssess(t *testing.T) {
	cs := fixedCases()
	for i, want := range []struct {
		v   Verdict
		met bool
	}{{Race, true}, {Safe, true}, {Errored, false}} {
		a := Assess(cs[i])
		if a.Verdict != want.v || a.Met != want.met {
			t.Errorf("case %d: verdict %s met %v, want %s %v (%s)", i, a.Verdict, a.Met, want.v, want.met, a.Why)
		}
	}
	// The same RACE fails an expectation of safe, and meets max=3.
	c := cs[0]
	c.Expect = Expect{Kind: "safe"}
	if Assess(c).Met {
		t.Error("RACE met an expectation of safe")
	}
	c.Expect = Expect{Kind: "max", Max: 3}
	if !Assess(c).Met {
		t.Error("worst burst 3 did not meet max=3")
	}
	c.Expect = Expect{Kind: "max", Max: 2}
	if Assess(c).Met {
		t.Error("worst burst 3 met max=2")
	}
	// A run whose attempts never overlapped is INCONCLUSIVE; --strict fails it.
	s := cs[1]
	r := *s.Result
	r.Bursts = append([]runner.Burst(nil), r.Bursts...)
	for i := range r.Bursts {
		r.Bursts[i].Overlap = 1
	}
	s.Result = &r
	if a := Assess(s); a.Verdict != Inconclusive || !a.Met {
		t.Errorf("no overlap: %s met=%v, want INCONCLUSIVE met (not strict)", a.Verdict, a.Met)
	}
	s.Strict = true
	if Assess(s).Met {
		t.Error("INCONCLUSIVE met the expectation under --strict")
	}
	// A failed check fails the expectation whatever the counts say.
	f := cs[1]
	fr := *f.Result
	fr.Checks = []runner.Check{{Name: "lease liveness", OK: false, Detail: "still held"}}
	f.Result = &fr
	if Assess(f).Met {
		t.Error("a failed check met the expectation")
	}
}

func TestParseExpect(t *testing.T) {
	for in, ok := range map[string]bool{"safe": true, "race": true, "max=2": true, "max=0": false, "max=x": false, "sometimes": false} {
		if _, err := ParseExpect(in); (err == nil) != ok {
			t.Errorf("ParseExpect(%q) err = %v, want ok=%v", in, err, ok)
		}
	}
}
