package scenarios

import "slices"

// RowVariants lists the variants a table of scenario on backend has a row
// for (racetest matrix), the default first, each once. They are the
// variants the backend declared (SetVariants), or, for a backend that
// declared none, those the catalog names for the scenario: its demo rows
// and the rows of the expectation table that apply to the backend. The
// default is "" unless the list names it first: "plain", or the variant
// of the scenario's first demo row ("naive", "check-then-pay").
func (r *Registry) RowVariants(scenario, backend string) []string {
	spec, _ := r.lookupSpec(scenario)
	named := r.Variants(scenario, backend)
	if len(named) == 0 {
		for _, d := range spec.Demo {
			named = append(named, d.Variant)
		}
		for _, row := range Expectations {
			if row.Scenario == scenario && (row.Backend == "" || row.Backend == backend) {
				named = append(named, row.Variant)
			}
		}
	}
	var out []string
	for _, v := range named {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) > 0 && (out[0] == "plain" || len(spec.Demo) > 0 && spec.Demo[0].Variant == out[0]) {
		return out
	}
	return append([]string{""}, out...)
}

// DependsOnIsolation reports whether the catalog expects a different
// verdict for scenario on backend at different isolation levels (of
// levels), for any of its variants: the scenarios a Hermitage-style
// matrix is about. The expectation is the catalog's before any server is
// known (rows that name a server do not count).
func (r *Registry) DependsOnIsolation(scenario, backend string, levels []string) bool {
	for _, v := range r.RowVariants(scenario, backend) {
		if dependsOnIsolation(scenario, backend, v, levels, r.ownRule(scenario)) {
			return true
		}
	}
	return false
}
