package runplan_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

func shape() runplan.Shape {
	return runplan.Shape{Attempts: 4, Bursts: 7, Replicas: 2, Waves: 2, Deploy: true, Keep: true,
		Latency: time.Millisecond, TTL: scenarios.DefaultTTL, Timeout: runner.DefaultTimeout, Seed: 42}
}

// A request becomes the runner's shape, the scenario's parameters and the
// case as the report shows it, all from one place.
func TestBuildCarriesTheRequest(t *testing.T) {
	reg := builtin.Registry()
	r, err := runplan.Build(reg, runplan.Request{Scenario: scenarios.MemorySet, Backend: "memory", Shape: shape(),
		Release: "gate", Expect: report.Expect{Kind: report.ExpectRace}, Strict: true, RunID: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.Config
	if cfg.Attempts != 4 || cfg.Bursts != 7 || cfg.Replicas != 2 || cfg.Waves != 2 || !cfg.Deploy || !cfg.Keep || cfg.Allowed != 1 {
		t.Errorf("config %+v does not carry the shape", cfg)
	}
	p := r.Params
	if p.RunID != "abc123" || p.Attempts != 4 || p.Replicas != 2 || p.Seed != 42 || p.Latency != time.Millisecond || p.Dial != nil {
		t.Errorf("params %+v do not carry the shape", p)
	}
	c := r.Case
	if c.Name != scenarios.MemorySet || c.Backend != "memory" || c.Expect.Kind != report.ExpectRace || !c.Strict || c.Release != "gate" || c.Lesson == "" {
		t.Errorf("case %+v", c)
	}
	if c.Settings["replicas"] != "2" || c.Settings["seed"] != "42" || c.Settings["deploy"] != "true" {
		t.Errorf("settings %v lack the run's knobs", c.Settings)
	}
	if r.Catalog || r.Warning != "" {
		t.Errorf("catalog %v, warning %q: neither was asked for", r.Catalog, r.Warning)
	}
	if !reflect.DeepEqual(r.Shape, shape()) {
		t.Errorf("the run's shape %+v is not the request's %+v", r.Shape, shape())
	}
}

// A catalog request expects what the catalog's table says before the run
// (check-then-write races), and the report names no release when none was asked.
func TestBuildCatalogExpectation(t *testing.T) {
	reg := builtin.Registry()
	r, err := runplan.Build(reg, runplan.Request{Scenario: scenarios.CheckThenWrite, Backend: "memory", Shape: shape(), Catalog: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Catalog || r.Case.Expect.Kind != report.ExpectRace {
		t.Errorf("catalog %v, expect %v; want the catalog's race", r.Catalog, r.Case.Expect)
	}
	if r.Case.Release != "" {
		t.Errorf("release %q named though none was asked for", r.Case.Release)
	}
	again := runplan.ResolveCatalog(reg, report.Case{Scenario: scenarios.ConditionalUpdate, Backend: "memory"}, r.Params)
	if again.Expect.Kind != report.ExpectSafe {
		t.Errorf("resolved %v, want conditional-update safe", again.Expect)
	}
}

// A release mode that does not apply falls back to the gate with a
// warning that is also a note of the run; one that does dials through it.
func TestBuildRelease(t *testing.T) {
	reg := builtin.Registry()
	r, err := runplan.Build(reg, runplan.Request{Scenario: scenarios.UniqueInsert, Backend: "memory", Shape: shape(), Release: "last-byte"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Case.Release != string(release.Gate) || r.Warning == "" || len(r.Config.Notes) == 0 {
		t.Errorf("memory + last-byte: release %q, warning %q, notes %v; want the gate, said", r.Case.Release, r.Warning, r.Config.Notes)
	}
	r, err = runplan.Build(reg, runplan.Request{Scenario: scenarios.UniqueInsert, Backend: "redis", Shape: shape(), Release: "last-byte"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Case.Release != string(release.LastByte) || r.Params.Dial == nil || r.Config.Release == nil || r.Warning != "" {
		t.Errorf("redis + last-byte: release %q, dial set %v, warning %q", r.Case.Release, r.Params.Dial != nil, r.Warning)
	}
	r, err = runplan.Build(reg, runplan.Request{Scenario: scenarios.UniqueInsert, Backend: "redis", ReleaseOn: release.Processes, Shape: shape(), Release: "last-byte"})
	if err != nil || r.Case.Release != string(release.Gate) || r.Warning == "" {
		t.Errorf("processes + last-byte: %v, release %q, warning %q; want the gate, said", err, r.Case.Release, r.Warning)
	}
}

// Every refusal names the part of the request it is about.
func TestBuildErrorsNameTheirField(t *testing.T) {
	reg := builtin.Registry()
	neg := shape()
	neg.Gap = -time.Second
	for _, tc := range []struct {
		field string
		req   runplan.Request
	}{
		{"scenario", runplan.Request{Scenario: "check-then-wrte", Backend: "memory", Shape: shape()}},
		{"backend", runplan.Request{Scenario: scenarios.CheckThenWrite, Backend: "oracle", Shape: shape()}},
		{"release", runplan.Request{Scenario: scenarios.CheckThenWrite, Backend: "memory", Shape: shape(), Release: "bogus"}},
		{"params", runplan.Request{Scenario: scenarios.CheckThenWrite, Backend: "memory", Shape: neg}},
	} {
		_, err := runplan.Build(reg, tc.req)
		var fe *runplan.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v, want a FieldError on %s", tc.field, err, tc.field)
		}
	}
}

// The default (auto) is last-byte on a backend with a wire, and the gate,
// with a note why, for memory-set (its check is in memory).
func TestBuildAuto(t *testing.T) {
	reg := builtin.Registry()
	r, err := runplan.Build(reg, runplan.Request{Scenario: scenarios.CheckThenWrite, Backend: "redis", Shape: shape(), Release: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Config.ReleaseName() != "last-byte" || r.Params.Dial == nil || r.Case.Release != "last-byte" || r.Warning != "" {
		t.Errorf("auto on redis: release %s, case %q, warning %q; want last-byte, quietly", r.Config.ReleaseName(), r.Case.Release, r.Warning)
	}
	r, err = runplan.Build(reg, runplan.Request{Scenario: scenarios.MemorySet, Backend: "redis", Shape: shape(), Release: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Config.ReleaseName() != "gate" || r.Params.Dial != nil || r.Case.Release != "gate" || len(r.Config.Notes) != 1 {
		t.Errorf("auto for memory-set on redis: release %s, case %q, notes %q; want the gate and a note", r.Config.ReleaseName(), r.Case.Release, r.Config.Notes)
	}
}

// A run Build made builds its own scenario on its own backend, from the
// parameters it is given: the plan, not the command, knows its target.
func TestBuildBuildsTheRegistrysScenario(t *testing.T) {
	reg := scenarios.NewRegistry()
	reg.AddBackend(scenarios.Backend{Name: "one"})
	reg.AddBackend(scenarios.Backend{Name: "two"})
	var built []string
	for _, name := range []string{"a", "b"} {
		reg.AddScenario(scenarios.Spec{Name: name, Allowed: 1,
			Expect: func(scenarios.Params) scenarios.Expectation { return scenarios.ExpectSafe }})
		for _, backend := range []string{"one", "two"} {
			reg.Register(name, backend, func(_ context.Context, p scenarios.Params) (runner.Target, error) {
				built = append(built, name+" on "+backend+" as "+p.RunID)
				return nil, errors.New("built")
			})
		}
	}
	r, err := runplan.Build(reg, runplan.Request{Scenario: "b", Backend: "two", Shape: shape(), RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Params
	p.RunID = "r2"
	if _, err := r.Build(context.Background(), p); err == nil || err.Error() != "built" {
		t.Fatalf("Build: %v, want the factory's own error", err)
	}
	if len(built) != 1 || built[0] != "b on two as r2" {
		t.Errorf("built %q, want b on two with the parameters given", built)
	}
	if r.After != nil {
		t.Error("a registry run has nothing to settle after it ran")
	}
}

// Options carries every runner knob of a shape, and the default shape is
// the runner's own defaults: each way of firing builds its configuration
// here, so a knob lost here is lost everywhere.
func TestShapeOptions(t *testing.T) {
	sh := runplan.Shape{Attempts: 3, Bursts: 4, Replicas: 2, Waves: 5, Deploy: true, Timeout: 7 * time.Second,
		Keep: true, Retries: 6, SoloEvery: 8}
	got := runner.NewConfig(sh.Options()...)
	want := runner.Config{Attempts: 3, Bursts: 4, Replicas: 2, Waves: 5, Deploy: true, Timeout: 7 * time.Second,
		Keep: true, Retries: 6, SoloEvery: 8, Allowed: runner.DefaultAllowed, Required: runner.DefaultRequired}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Options gave\n%+v\nwant\n%+v", got, want)
	}
	if got, want := runner.NewConfig(runplan.DefaultShape().Options()...), runner.NewConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("the default shape gave\n%+v\nwant the runner's defaults\n%+v", got, want)
	}
	if d := runplan.DefaultShape(); d.Latency != scenarios.DefaultLatency || d.TTL != scenarios.DefaultTTL {
		t.Errorf("the default shape's latency %s and ttl %s are not the scenarios' defaults", d.Latency, d.TTL)
	}
}
