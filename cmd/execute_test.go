package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/racetest/racetest/report"
)

// TestReportTellsTheScenariosStory: a run's JSON report (and so its HTML
// page, which reads the same case) carries the scenario's story as
// 'racetest explain' tells it, the naive code first; a trainer's page
// without it shows numbers with no lesson.
func TestReportTellsTheScenariosStory(t *testing.T) {
	spec, err := memoryOnly().Scenario("check-then-write")
	if err != nil || spec.Story.Breaks == "" {
		t.Fatalf("check-then-write has no story to tell (%v)", err)
	}
	out, errOut, code := execCmd(t, false, "run", "check-then-write", "-n", "2", "--bursts", "2", "--format", "json")
	if code != ExitOK && code != ExitViolated {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 1 {
		t.Fatalf("not a one-run JSON report (%v):\n%s", err, out)
	}
	story := doc.Runs[0].Story
	if len(story) == 0 {
		t.Fatalf("the report has no story:\n%s", out)
	}
	if story[0].Title != "The naive code" || story[0].Text != spec.Story.Naive || !story[0].Code {
		t.Errorf("the story opens with %+v, want the naive code as code", story[0])
	}
	found := false
	for _, p := range story {
		found = found || (p.Title == "Why it breaks" && p.Text == spec.Story.Breaks)
	}
	if !found {
		t.Errorf("the story %+v does not say why it breaks", story)
	}
}

// TestInterruptNamesTheCleanFlag: a second Ctrl-C names, for each run under
// way on a server, the flag with which 'racetest clean' reaches that server
// ("with the run's --postgres-url"); an embedded backend has none to name.
func TestInterruptNamesTheCleanFlag(t *testing.T) {
	f := &Factory{IO: func() *IOStreams { io, _, _ := Test(); return io }(), Registry: memoryOnly()}
	clean, _, err := NewCmdRoot(f).Find([]string{"clean"})
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"redis", "mysql", "postgres", "mongo"} {
		flag := connFlag(f.Registry, backend)
		if !strings.HasPrefix(flag, "--"+backend+"-") || clean.Flags().Lookup(strings.TrimPrefix(flag, "--")) == nil {
			t.Errorf("%s: the interrupt message would name %q, not a flag of 'racetest clean'", backend, flag)
		}
	}
	if flag := connFlag(f.Registry, "memory"); flag != "" {
		t.Errorf("memory: the interrupt message would name %q; the embedded store has no server", flag)
	}
}
