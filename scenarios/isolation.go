package scenarios

import (
	"fmt"
	"strings"
)

// isolationLevels are the levels a run can ask for, "" (the server's
// default) first.
var isolationLevels = []string{"", "read-uncommitted", "read-committed", "repeatable-read", "serializable"}

// DependsOnIsolation reports whether the catalog's expectation for scenario
// with variant changes with the isolation level on some SQL server: read
// from the expectation table, so that it cannot disagree with it. Without
// a registry the scenario's own rule is not known: a level no row matches
// expects SAFE, as it does for a scenario without one.
func DependsOnIsolation(scenario, variant string) bool {
	for _, backend := range []string{"mysql", "postgres"} {
		if dependsOnIsolation(scenario, backend, variant, isolationLevels, nil) {
			return true
		}
	}
	return false
}

// dependsOnIsolation is the one answer behind both DependsOnIsolation and
// Registry.DependsOnIsolation: whether two of levels give scenario with
// variant on backend different expectations, before any server is known,
// for one replica. own is the scenario's own rule (nil: SAFE).
func dependsOnIsolation(scenario, backend, variant string, levels []string, own func(Params) Expectation) bool {
	expect := func(level string) Expectation {
		e, _ := expectation(scenario, backend, Params{Isolation: level, Variant: variant, Replicas: 1}, "", own)
		return e
	}
	for _, l := range levels[min(1, len(levels)):] {
		if expect(l) != expect(levels[0]) {
			return true
		}
	}
	return false
}

// NoIsolation refuses --isolation on a backend without isolation levels
// (the embedded store): a run there would seem to have measured a level it
// never had.
func NoIsolation(scenario string, p Params) error {
	if p.Isolation == "" {
		return nil
	}
	return BadParam(fmt.Errorf("--isolation %s does not apply: the embedded store has no transactions and no isolation levels (every read sees the last write) — drop --isolation, or measure %s at a level with --backend mysql or --backend postgres",
		p.Isolation, scenario))
}

// IsolationNote is what a report on the embedded store says about scenario
// with variant when its outcome on a SQL server depends on the isolation
// level, and "" when it does not.
func IsolationNote(scenario, variant string) string {
	if !DependsOnIsolation(scenario, variant) {
		return ""
	}
	what := scenario
	if variant != "" {
		what += " (" + strings.TrimSpace(variant) + ")"
	}
	return fmt.Sprintf("memory: no isolation levels here — every read sees the last write. On MySQL and PostgreSQL the outcome of %s depends on the isolation level (see 'racetest explain %s')",
		what, scenario)
}
