package suite_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/suite"
)

// matrixRegistry is a small catalog: check-then-write (whose verdict the
// catalog expects to change with the isolation level) and
// conditional-update (SAFE at every level) on stand-ins named mysql (all
// four levels; plain and for-update) and postgres (two levels; for-update
// beside its unnamed default), and memory-set on memory, which has no
// levels. Nothing is ever built.
func matrixRegistry() *scenarios.Registry {
	reg := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		reg.AddScenario(s)
	}
	none := func(context.Context, scenarios.Params) (runner.Target, error) { return nil, nil }
	reg.AddBackend(scenarios.Backend{Name: "memory"})
	reg.AddBackend(scenarios.Backend{Name: "mysql", Server: true, Isolations: []string{"read-uncommitted", "read-committed", "repeatable-read", "serializable"}})
	reg.AddBackend(scenarios.Backend{Name: "postgres", Server: true, Isolations: []string{"read-committed", "serializable"}})
	reg.Register(scenarios.MemorySet, "memory", none)
	for _, b := range []string{"mysql", "postgres"} {
		reg.Register(scenarios.CheckThenWrite, b, none)
		reg.Register(scenarios.ConditionalUpdate, b, none)
	}
	reg.SetVariants(scenarios.CheckThenWrite, "mysql", []string{"plain", "for-update"})
	reg.SetVariants(scenarios.CheckThenWrite, "postgres", []string{"for-update"})
	return reg
}

func flag(name string) string { return "--" + name }

// cellNames writes cells as backend/scenario/variant/level, for a diff.
func cellNames(cells []suite.MatrixCell) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = fmt.Sprintf("%s/%s/%s/%s", c.Backend, c.Spec.Name, c.Variant, c.Isolation)
	}
	return out
}

// Only the backends with isolation levels have a matrix, in catalog order.
func TestMatrixBackends(t *testing.T) {
	if got := suite.MatrixBackends(matrixRegistry()); !slices.Equal(got, []string{"mysql", "postgres"}) {
		t.Errorf("MatrixBackends = %q, want mysql, postgres", got)
	}
}

// The cells come backend by backend, then scenario, variant (the default
// first) and level, weakest first whatever the order asked; only the
// scenarios whose verdict depends on the level are rows by default.
func TestMatrixCellsOrder(t *testing.T) {
	m := suite.Matrix{Backends: []string{"mysql", "postgres"}, Isolations: []string{"serializable", "read-committed", "serializable"}}
	cells, err := m.Cells(matrixRegistry(), flag)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mysql/check-then-write/plain/read-committed", "mysql/check-then-write/plain/serializable",
		"mysql/check-then-write/for-update/read-committed", "mysql/check-then-write/for-update/serializable",
		"postgres/check-then-write//read-committed", "postgres/check-then-write//serializable",
		"postgres/check-then-write/for-update/read-committed", "postgres/check-then-write/for-update/serializable",
	}
	if got := cellNames(cells); !slices.Equal(got, want) {
		t.Errorf("cells:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Every backend gets the same columns, all four on mysql alone; a level
// one backend does not take is refused, naming what it takes.
func TestMatrixCellsLevels(t *testing.T) {
	reg := matrixRegistry()
	all := []string{"read-uncommitted", "read-committed", "repeatable-read", "serializable"}
	cells, err := suite.Matrix{Backends: []string{"mysql"}, Isolations: all, Variants: []string{"plain"}}.Cells(reg, flag)
	if err != nil {
		t.Fatal(err)
	}
	var levels []string
	for _, c := range cells {
		levels = append(levels, c.Isolation)
	}
	if !slices.Equal(levels, all) {
		t.Errorf("mysql's plain row has the levels %q, want %q", levels, all)
	}
	_, err = suite.Matrix{Backends: []string{"mysql", "postgres"}, Isolations: all}.Cells(reg, flag)
	if want := "--isolation read-uncommitted: postgres does not take it (it takes read-committed, serializable)"; err == nil || err.Error() != want {
		t.Errorf("a level postgres lacks: %v, want %q", err, want)
	}
	cells, err = suite.Matrix{Backends: []string{"postgres"}, Isolations: []string{"read-committed"}, Variants: []string{suite.DefaultVariant}}.Cells(reg, flag)
	if err != nil || len(cells) != 1 || cells[0].Variant != "" {
		t.Errorf("--variant default on postgres: %v, %q; want its one unnamed default", err, cellNames(cells))
	}
}

// Of two unknown variants, the error names the first given, every time
// (the variants asked are kept in a set: ranging over it named either).
func TestMatrixCellsUnknownVariantNamesTheFirst(t *testing.T) {
	reg := matrixRegistry()
	for _, tc := range [][]string{{"zzz", "nope"}, {"nope", "zzz"}} {
		want := fmt.Sprintf(`--variant: no scenario of this matrix has a variant %q on mysql, postgres (known: default, for-update, plain)`, tc[0])
		for range 20 {
			_, err := suite.Matrix{Backends: []string{"mysql", "postgres"}, Isolations: []string{"serializable"}, Variants: tc}.Cells(reg, flag)
			if err == nil || err.Error() != want {
				t.Fatalf("%q: %v, want %q", tc, err, want)
			}
		}
	}
}

// Each mistake is named through the caller's field names.
func TestMatrixCellsBadInput(t *testing.T) {
	reg := matrixRegistry()
	levels := []string{"serializable"}
	for _, tc := range []struct {
		m    suite.Matrix
		want string
	}{
		{suite.Matrix{Isolations: levels}, "--backend is empty: name one or more of mysql, postgres"},
		{suite.Matrix{Backends: []string{"mysq"}, Isolations: levels}, `--backend: unknown backend "mysq"`},
		{suite.Matrix{Backends: []string{"memory"}, Isolations: levels}, "--backend memory: the matrix's columns are isolation levels, and memory has none; it runs on mysql, postgres"},
		{suite.Matrix{Backends: []string{"mysql"}}, "--isolation is empty"},
		{suite.Matrix{Backends: []string{"mysql"}, Isolations: []string{"snapshot"}}, `--isolation: unknown isolation level "snapshot"`},
		// An empty level (a stray comma) is named as one, not read as the server's default.
		{suite.Matrix{Backends: []string{"mysql"}, Isolations: []string{"serializable", ""}}, `--isolation: unknown isolation level ""`},
		{suite.Matrix{Backends: []string{"mysql"}, Isolations: levels, Scenarios: []string{"chek-then-write"}}, `--scenario: unknown scenario "chek-then-write"`},
		{suite.Matrix{Backends: []string{"mysql"}, Isolations: levels, Scenarios: []string{"memory-set"}}, "--scenario memory-set does not run on mysql; it runs on: memory"},
	} {
		_, err := tc.m.Cells(reg, flag)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.m, err, tc.want)
		}
	}
}

// A scenario named twice is one row; one the catalog does not expect to
// depend on the level is a row when named.
func TestMatrixCellsNamedScenarios(t *testing.T) {
	m := suite.Matrix{Backends: []string{"postgres"}, Isolations: []string{"serializable"},
		Scenarios: []string{"conditional-update", "check-then-write", "conditional-update"}}
	cells, err := m.Cells(matrixRegistry(), flag)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"postgres/conditional-update//serializable", "postgres/check-then-write//serializable", "postgres/check-then-write/for-update/serializable"}
	if got := cellNames(cells); !slices.Equal(got, want) {
		t.Errorf("cells %q, want %q", got, want)
	}
}

// A cell's run: its level and variant in the shape, its name in the
// report, the catalog's strict expectation, the gate release.
func TestMatrixCellRequest(t *testing.T) {
	reg := matrixRegistry()
	spec, _ := reg.Scenario(scenarios.CheckThenWrite)
	sh := runplan.Shape{Attempts: 4, Bursts: 7, Replicas: 1}
	for _, tc := range []struct {
		variant, name string
	}{{"", "check-then-write (serializable)"}, {"for-update", "check-then-write (for-update, serializable)"}} {
		req := suite.MatrixCell{Spec: spec, Backend: "postgres", Isolation: "serializable", Variant: tc.variant}.Request(sh)
		if req.Name != tc.name || req.Scenario != spec.Name || req.Backend != "postgres" || !req.Catalog || !req.Strict || req.Release != "gate" ||
			req.Shape.Isolation != "serializable" || req.Shape.Variant != tc.variant || req.Shape.Attempts != 4 || req.Shape.Bursts != 7 {
			t.Errorf("request %+v", req)
		}
		if _, err := runplan.Build(reg, req); err != nil {
			t.Errorf("runplan.Build(%+v): %v", req, err)
		}
	}
	if sh.Isolation != "" {
		t.Error("Request changed the shape it was given")
	}
}
