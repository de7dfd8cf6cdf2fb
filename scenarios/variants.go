package scenarios

import "slices"

// SetVariants declares the variants scenario accepts on backend
// (--variant): def, the default's name ("" when the default has none), then
// the others. A backend declares them where it registers the scenario, from
// the same list it validates --variant with, so that a matrix runs every
// variant the backend has and none it refuses. scenario must be registered
// on backend.
func (r *Registry) SetVariants(scenario, backend, def string, others ...string) {
	k := [2]string{scenario, backend}
	if _, ok := r.impls[k]; !ok {
		panic("scenarios: variants for unregistered " + scenario + " on " + backend)
	}
	r.variants[k] = append([]string{def}, others...)
}

// Variants lists the variants of scenario on backend, the default first
// ("" when it has no name of its own), each once. They are those the
// backend declared (SetVariants); for a backend that declared none, ""
// and the variants the catalog names for the scenario: its demo rows, and
// the rows of the expectation table that apply to the backend.
func (r *Registry) Variants(scenario, backend string) []string {
	named, declared := r.variants[[2]string{scenario, backend}]
	if !declared {
		named = []string{""}
		if s, ok := r.lookupSpec(scenario); ok {
			for _, d := range s.Demo {
				named = append(named, d.Variant)
			}
		}
		for _, row := range Expectations {
			if row.Scenario == scenario && (row.Backend == "" || row.Backend == backend) {
				named = append(named, row.Variant)
			}
		}
	}
	out := named[:1:1]
	for _, v := range named[1:] {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// DependsOnIsolation reports whether the catalog expects a different
// verdict for scenario on backend at different isolation levels (of
// levels), for any of its variants: the scenarios a Hermitage-style
// matrix is about. The expectation is the catalog's before any server is
// known (rows that name a server do not count).
func (r *Registry) DependsOnIsolation(scenario, backend string, levels []string) bool {
	for _, v := range r.Variants(scenario, backend) {
		var first Expectation
		for i, l := range levels {
			e, _ := r.Expect(scenario, backend, Params{Isolation: l, Variant: v, Replicas: 1}, "")
			if i == 0 {
				first = e
			} else if e != first {
				return true
			}
		}
	}
	return false
}
