package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/suite"
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
	if code != exitOK && code != exitViolated {
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
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	clean, _, err := newCmdRoot(f).Find([]string{"clean"})
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

// TestExecuteBuildsThePlansOwnTarget: execute fires at the target the plan
// builds, with the plan's parameters, and lets the plan complete the case
// from that target once it ran; a plan whose target cannot be built ends
// as a case with that error, and nothing is settled after.
func TestExecuteBuildsThePlansOwnTarget(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	pl, err := runplan.Build(f.Registry, runplan.Request{Scenario: "conditional-update", Backend: "memory",
		Shape: runplan.Shape{Attempts: 2, Bursts: 2, Replicas: 1, Waves: 1, Timeout: time.Second}, RunID: "own"})
	if err != nil {
		t.Fatal(err)
	}
	var built runner.Target
	var builtFor string
	registry := pl.Build
	pl.Build = func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		builtFor = p.RunID
		built, err = registry(ctx, p)
		return built, err
	}
	var settled runner.Target
	pl.After = func(tg runner.Target, c report.Case) report.Case {
		settled = tg
		c.Name = "settled"
		return c
	}
	cases := execute(context.Background(), f, []plan{pl}, nil)
	if len(cases) != 1 || cases[0].Err != nil || cases[0].Result == nil || len(cases[0].Result.Bursts) != 2 {
		t.Fatalf("cases %+v: want one run of 2 bursts", cases)
	}
	if builtFor != "own" || settled == nil || settled != built || cases[0].Name != "settled" {
		t.Errorf("built for %q, settled with %v (built %v), name %q: want the plan's own target, settled by After",
			builtFor, settled, built, cases[0].Name)
	}

	broken := errors.New("no target here")
	pl.Build = func(context.Context, scenarios.Params) (runner.Target, error) { return nil, broken }
	settled = nil
	cases = execute(context.Background(), f, []plan{pl}, nil)
	if !errors.Is(cases[0].Err, broken) || cases[0].Result != nil || settled != nil || cases[0].Name == "settled" {
		t.Errorf("case %+v, settled %v: want the build's error and nothing settled", cases[0], settled)
	}
}

// TestScriptRunsAreNotInFlight: a second Ctrl-C names what a run on a
// server may leave behind; a script run makes nothing of racetest's own,
// so it is not named, while a scenario's run on the same server is.
func TestScriptRunsAreNotInFlight(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	for _, tc := range []struct {
		scenario string
		named    bool
	}{{suite.ScriptScenario, false}, {"check-then-write", true}} {
		var during string
		pl := plan{Case: report.Case{Name: tc.scenario, Scenario: tc.scenario, Backend: "postgres"},
			Params: scenarios.Params{RunID: "inflight1"},
			Build: func(context.Context, scenarios.Params) (runner.Target, error) {
				during = inFlight.leftovers()
				return nil, errors.New("not connecting")
			}}
		execute(context.Background(), f, []plan{pl}, nil)
		if named := strings.Contains(during, "racetest_inflight1_"); named != tc.named {
			t.Errorf("%s: while it ran, a second Ctrl-C would say %q (naming the run: %v, want %v)", tc.scenario, during, named, tc.named)
		}
		if after := inFlight.leftovers(); strings.Contains(after, "inflight1") {
			t.Errorf("%s: still in flight after it ended: %q", tc.scenario, after)
		}
	}
}
