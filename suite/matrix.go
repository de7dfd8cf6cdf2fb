package suite

import (
	"fmt"
	"slices"
	"strings"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
)

// A matrix is a generated suite: scenario × isolation level × variant on
// each SQL backend, every cell held to the catalog ('racetest matrix').
// Matrix.Cells expands it from the registry; each cell's Request is the
// run runplan.Build makes of it.

// Matrix is the matrix asked for. Empty Scenarios are every scenario whose
// expected verdict depends on the isolation level; empty Variants, every
// variant of each scenario.
type Matrix struct {
	Backends, Scenarios, Variants, Isolations []string
}

// MatrixCell is one cell to run: a scenario's variant at one isolation
// level on one backend. Variant "" is the scenario's unnamed default.
type MatrixCell struct {
	Spec                        scenarios.Spec
	Backend, Isolation, Variant string
}

// DefaultVariant names, in a matrix's Variants, the default of a scenario
// whose default has no name of its own.
const DefaultVariant = "default"

// MatrixBackends are the backends with isolation levels, as each declares
// them: the matrix's columns exist only there.
func MatrixBackends(reg *scenarios.Registry) []string {
	var names []string
	for _, b := range reg.Backends() {
		if len(b.Isolations) > 0 {
			names = append(names, b.Name)
		}
	}
	return names
}

// Cells checks the matrix against the registry and lists its cells,
// backend by backend, then scenario, variant and isolation level (weakest
// first, in whatever order they were asked for). Every error is bad input,
// found before anything runs; field names a part of the matrix in it
// (backend, scenario, variant, isolation) as the asker calls it: "--backend".
func (m Matrix) Cells(reg *scenarios.Registry, field func(name string) string) ([]MatrixCell, error) {
	sqlBackends := MatrixBackends(reg)
	if len(m.Backends) == 0 {
		return nil, fmt.Errorf("%s is empty: name one or more of %s", field("backend"), strings.Join(sqlBackends, ", "))
	}
	for _, b := range m.Backends {
		if _, err := reg.Backend(b); err != nil {
			return nil, fmt.Errorf("%s: %w", field("backend"), err)
		}
		if !slices.Contains(sqlBackends, b) {
			return nil, fmt.Errorf("%s %s: the matrix's columns are isolation levels, and %s has none; it runs on %s",
				field("backend"), b, b, strings.Join(sqlBackends, ", "))
		}
	}
	levels, err := m.levels(reg, field)
	if err != nil {
		return nil, err
	}
	specs, err := m.scenarios(reg, field)
	if err != nil {
		return nil, err
	}
	// Variants as given, the default named "": in the order given, so
	// that of two unknown variants the user always hears of the first.
	asked := make([]string, 0, len(m.Variants))
	variants := map[string]bool{}
	for _, v := range m.Variants {
		if v == DefaultVariant {
			v = ""
		}
		asked = append(asked, v)
		variants[v] = true
	}
	var cells []MatrixCell
	known := map[string]bool{}
	for _, b := range m.Backends {
		for _, s := range specs {
			if !slices.Contains(reg.BackendsOf(s.Name), b) {
				continue
			}
			for _, v := range reg.RowVariants(s.Name, b) {
				known[v] = true
				if len(variants) > 0 && !variants[v] {
					continue
				}
				for _, l := range levels {
					cells = append(cells, MatrixCell{Spec: s, Backend: b, Isolation: l, Variant: v})
				}
			}
		}
	}
	for _, v := range asked {
		if !known[v] {
			return nil, fmt.Errorf("%s: no scenario of this matrix has a variant %q on %s (known: %s)",
				field("variant"), v, strings.Join(m.Backends, ", "), strings.Join(variantNames(known), ", "))
		}
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("nothing to run: no scenario of the catalog has a variant and isolation level on %s", strings.Join(m.Backends, ", "))
	}
	return cells, nil
}

// levels are the matrix's columns: its isolation levels, each checked to
// be taken by every backend, once each, weakest first as the Hermitage
// tables read.
func (m Matrix) levels(reg *scenarios.Registry, field func(string) string) ([]string, error) {
	if len(m.Isolations) == 0 {
		return nil, fmt.Errorf("%s is empty: name one or more levels, or leave the flag out for all four", field("isolation"))
	}
	var levels []string
	for _, l := range m.Isolations {
		lvl, err := sqldb.ParseIsolation(l)
		if err != nil || lvl == "" {
			return nil, fmt.Errorf("%s: unknown isolation level %q (known: read-uncommitted, read-committed, repeatable-read, serializable)", field("isolation"), l)
		}
		for _, b := range m.Backends {
			if bk, _ := reg.Backend(b); !slices.Contains(bk.Isolations, string(lvl)) {
				return nil, fmt.Errorf("%s %s: %s does not take it (it takes %s)", field("isolation"), l, b, strings.Join(bk.Isolations, ", "))
			}
		}
		if !slices.Contains(levels, string(lvl)) {
			levels = append(levels, string(lvl))
		}
	}
	order := sqldb.Isolations()
	slices.SortFunc(levels, func(a, b string) int {
		return slices.Index(order, sqldb.Isolation(a)) - slices.Index(order, sqldb.Isolation(b))
	})
	return levels, nil
}

// scenarios are the scenarios the matrix names, each checked to run on one
// of its backends, or else every scenario whose expected verdict depends
// on the isolation level on one of them.
func (m Matrix) scenarios(reg *scenarios.Registry, field func(string) string) ([]scenarios.Spec, error) {
	var specs []scenarios.Spec
	if len(m.Scenarios) == 0 {
		for _, s := range reg.Scenarios() {
			if s.Topology != "" {
				continue // needs a cluster, not the one server the matrix is given
			}
			for _, b := range m.Backends {
				// Over every level the backend has, not only the columns
				// asked for: asking for serializable alone keeps the same rows.
				bk, _ := reg.Backend(b)
				if slices.Contains(reg.BackendsOf(s.Name), b) && reg.DependsOnIsolation(s.Name, b, bk.Isolations) {
					specs = append(specs, s)
					break
				}
			}
		}
		return specs, nil
	}
	for _, name := range m.Scenarios {
		s, err := reg.Scenario(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field("scenario"), err)
		}
		on := reg.BackendsOf(name)
		if !slices.ContainsFunc(m.Backends, func(b string) bool { return slices.Contains(on, b) }) {
			return nil, fmt.Errorf("%s %s does not run on %s; it runs on: %s", field("scenario"), name, strings.Join(m.Backends, ", "), strings.Join(on, ", "))
		}
		if !slices.ContainsFunc(specs, func(x scenarios.Spec) bool { return x.Name == name }) {
			specs = append(specs, s)
		}
	}
	return specs, nil
}

// variantNames lists variants for a message, sorted, the default named.
func variantNames(known map[string]bool) []string {
	var names []string
	for v := range known {
		if v == "" {
			v = DefaultVariant
		}
		names = append(names, v)
	}
	slices.Sort(names)
	return names
}

// Request is the cell's run in a matrix of shape sh, for runplan.Build:
// the catalog's expectation (resolved again once the server is known),
// strict (a cell that proved nothing is no row of a Hermitage table), and
// the gate release, with which the matrix was measured: it names it, so
// that the default (auto, last-byte on these servers) does not change it.
func (c MatrixCell) Request(sh runplan.Shape) runplan.Request {
	sh.Isolation, sh.Variant = c.Isolation, c.Variant
	label := c.Isolation
	if c.Variant != "" {
		label = c.Variant + ", " + label
	}
	return runplan.Request{
		Scenario: c.Spec.Name, Backend: c.Backend, Name: c.Spec.Name + " (" + label + ")",
		Shape: sh, Catalog: true, Strict: true, Release: string(release.Gate),
	}
}
