package runplan_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

// A report lists the knobs a reader needs to reproduce the run, and only
// those that differ from racetest's defaults: a default is not a setting.
// The memory backend's latency and seed always show (they drive its
// jitter); a TTL of 0 means the scenario's default lease, so it shows
// nothing. (cmd's TestReportShowsTheKnobsThatDifferFromTheDefaults checks
// the same through 'racetest run --format json'.)
func TestSettingsAreTheKnobsThatDifferFromTheDefaults(t *testing.T) {
	base := runplan.Shape{Attempts: 2, Bursts: 1, Replicas: 1, Waves: 1, Latency: scenarios.DefaultLatency,
		TTL: scenarios.DefaultTTL, Timeout: runner.DefaultTimeout, Seed: 7}
	memory := map[string]string{"latency": "200µs", "seed": "7"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(memory)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		change func(*runplan.Shape)
		want   map[string]string
	}{
		{"defaults", func(*runplan.Shape) {}, memory},
		{"ttl 0", func(s *runplan.Shape) { s.TTL = 0 }, memory},
		{"gap", func(s *runplan.Shape) { s.Gap = time.Millisecond }, with("gap", "1ms")},
		{"replicas", func(s *runplan.Shape) { s.Replicas = 2 }, with("replicas", "2")},
		{"ttl", func(s *runplan.Shape) { s.TTL = 70 * time.Millisecond }, with("ttl", "70ms")},
		{"timeout", func(s *runplan.Shape) { s.Timeout = 3 * time.Second }, with("timeout", "3s")},
		{"waves", func(s *runplan.Shape) { s.Waves = 2 }, with("waves", "2", "deploy", "false")},
		{"effects auto", func(s *runplan.Shape) { s.SoloEvery = 1 }, with("effects", "auto")},
	} {
		sh := base
		tc.change(&sh)
		r, err := runplan.Build(builtin.Registry(), runplan.Request{Scenario: scenarios.MemorySet, Backend: "memory", Shape: sh})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := r.Case.Settings; !maps.Equal(got, tc.want) {
			t.Errorf("%s: settings %v, want %v", tc.name, got, tc.want)
		}
		if r.Config.SoloEvery != sh.SoloEvery {
			t.Errorf("%s: the runner's solo twins every %d bursts, want %d", tc.name, r.Config.SoloEvery, sh.SoloEvery)
		}
	}
}

// Once a run names its server, a catalog expectation is resolved again:
// conditional-update on FerretDB races (the catalog's table knows it), and
// the run's notes say why, on a copy: the result the run returned keeps
// its own notes.
func TestResolveCatalogNamesTheServersRow(t *testing.T) {
	r := &runner.Result{Server: "FerretDB 1.24.2 (MongoDB 7.0.42 wire)", Notes: []string{"the run's own note"}}
	c := report.Case{Scenario: scenarios.ConditionalUpdate, Backend: "mongo", Expect: report.Expect{Kind: report.ExpectSafe}, Result: r}
	got := runplan.ResolveCatalog(builtin.Registry(), c, scenarios.Params{})
	if got.Expect.Kind != report.ExpectRace {
		t.Fatalf("expect %s on FerretDB, want race", got.Expect)
	}
	notes := got.Result.Notes
	if len(notes) != 2 || notes[0] != "the run's own note" || !strings.HasPrefix(notes[1], report.CatalogNotePrefix+"expects RACE here: ") {
		t.Errorf("notes %q: want the run's note, then why the catalog expects RACE", notes)
	}
	if len(r.Notes) != 1 {
		t.Errorf("the run's own result was changed: %q", r.Notes)
	}
}

// A catalog row without a reason adds no note to the run, and a case
// without a result (its run never started) still gets the catalog's
// expectation, with nothing to note it on.
func TestResolveCatalogNotesOnlyAReason(t *testing.T) {
	r := &runner.Result{Server: "MariaDB 10.11", Notes: []string{"the run's own note"}}
	got := runplan.ResolveCatalog(builtin.Registry(), report.Case{Scenario: scenarios.UniqueInsert, Backend: "memory", Result: r}, scenarios.Params{})
	if got.Expect.Kind != report.ExpectSafe || len(got.Result.Notes) != 1 {
		t.Errorf("unique-insert on memory: expect %s, notes %q; want safe and the run's own note alone", got.Expect, got.Result.Notes)
	}
	got = runplan.ResolveCatalog(builtin.Registry(), report.Case{Scenario: scenarios.ConditionalUpdate, Backend: "mongo"}, scenarios.Params{Variant: ""})
	if got.Result != nil || got.Expect.Kind == "" {
		t.Errorf("no result: expect %q, result %v; want the catalog's expectation and still no result", got.Expect, got.Result)
	}
}
