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
// from the expectation table, so that it cannot disagree with it.
func DependsOnIsolation(scenario, variant string) bool {
	for _, backend := range []string{"mysql", "postgres"} {
		if varies(isolationLevels, func(level string) Expectation {
			return tableExpect(scenario, backend, Params{Isolation: level, Variant: variant})
		}) {
			return true
		}
	}
	return false
}

// varies reports whether expect gives two levels of levels different
// expectations.
func varies(levels []string, expect func(level string) Expectation) bool {
	for _, l := range levels[min(1, len(levels)):] {
		if expect(l) != expect(levels[0]) {
			return true
		}
	}
	return false
}

// tableExpect is the first matching row's expectation, or "" when no row
// matches.
func tableExpect(scenario, backend string, p Params) Expectation {
	for _, row := range Expectations {
		if row.Match(scenario, backend, p, "") {
			return row.Expect
		}
	}
	return ""
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
