package mysqlstore

import (
	"slices"
	"testing"
)

// Engines (what help text, completions and the registry list) names every
// engine the backend creates tables with, and nothing else.
func TestEnginesListsEveryEngine(t *testing.T) {
	for k := range engines {
		if k != "" && !slices.Contains(Engines, k) {
			t.Errorf("engine %q is accepted but not listed in Engines %v", k, Engines)
		}
	}
	for _, e := range Engines {
		if _, err := EngineName(e); err != nil {
			t.Errorf("listed engine %q is refused: %v", e, err)
		}
	}
	if engines[""] != engines[Engines[0]] {
		t.Errorf("the default engine is %s, but Engines lists %s first", engines[""], Engines[0])
	}
}
