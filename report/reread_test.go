package report

import (
	"bytes"
	"strings"
	"testing"
)

// A saved JSON report renders as the run did, in every format: the JSON
// carries every figure the reporters read.
func TestReportReRendersSavedJSON(t *testing.T) {
	cases := fixedCases()
	cases[0].Story = []StoryPart{{Title: "The naive code", Text: "read; if free, write"}}
	cases[1].Strict, cases[1].Prove = true, 0.5
	var saved bytes.Buffer
	if err := JSON(&saved, cases, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	doc, err := ReadDocument(bytes.NewReader(saved.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	again, err := doc.Cases()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(Formats(), "table-80") {
		t.Run(name, func(t *testing.T) {
			o := Options{Version: "test", Timeline: true, Title: "t"}
			if name == "table-80" {
				name, o.Width = "table", 80
			}
			r, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			var want, got bytes.Buffer
			if err := r(&want, cases, o); err != nil {
				t.Fatal(err)
			}
			if err := r(&got, again, o); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("re-rendered %s differs from the run's:\n--- got\n%s\n--- want\n%s", name, got.String(), want.String())
			}
		})
	}
}

func TestReadDocumentRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`not json`, "not a racetest JSON report"},
		{`{"schema": "racetest/v0", "racetest_version": "old", "runs": []}`, `schema "racetest/v0" is not "racetest/v1", the one this racetest reads: render it with racetest old, which wrote it`},
		{`{"schema": "racetest/v0", "runs": []}`, `render it with the racetest that wrote it`},
		{`{"runs": []}`, `not a racetest JSON report: it has no "schema" (racetest writes "racetest/v1")`},
	} {
		if _, err := ReadDocument(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadDocument(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	// A run saved without its bursts' figures cannot be judged again.
	doc := Document{Schema: SchemaVersion, Version: "v0.1", Runs: []RunJSON{{Name: "x", Backend: "memory", Expect: "safe", Attempts: 2, Bursts: 3}}}
	if _, err := doc.Cases(); err == nil || !strings.Contains(err.Error(), "run it again") {
		t.Errorf("a run without per-burst figures: %v, want an error saying to run it again", err)
	}
	// Nor a run whose figures are more than its bursts, none included.
	doc.Runs[0].Bursts, doc.Runs[0].PerBurst = 0, []BurstJSON{{}}
	if _, err := doc.Cases(); err == nil || !strings.Contains(err.Error(), "has 0 bursts but the figures of 1") {
		t.Errorf("a run of 0 bursts with one burst's figures: %v, want refused", err)
	}
}
