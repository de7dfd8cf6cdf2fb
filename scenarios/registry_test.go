package scenarios_test

import (
	"testing"

	"github.com/racetest/racetest/scenarios"
)

// A backend's connections are keyed by its name (and name_read): a
// declaration that keys them otherwise is refused when it is added, not
// met as a suite key nobody can write.
func TestAddBackendHoldsConnectionKeys(t *testing.T) {
	for name, b := range map[string]scenarios.Backend{
		"conn":      {Name: "x", Conn: &scenarios.Connection{Key: "y"}},
		"read conn": {Name: "x", Conn: &scenarios.Connection{Key: "x"}, ReadConn: &scenarios.Connection{Key: "x"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: added", name)
				}
			}()
			scenarios.NewRegistry().AddBackend(b)
		}()
	}
	scenarios.NewRegistry().AddBackend(scenarios.Backend{Name: "x", Conn: &scenarios.Connection{Key: "x"}, ReadConn: &scenarios.Connection{Key: "x" + scenarios.ReadSuffix}})
}

// Set on a copy never changes the original: Params are copied freely.
func TestConnectionsAreValues(t *testing.T) {
	a := scenarios.NewConnections(map[string]string{"redis": "redis://a"})
	b := a
	b.Set("redis", "redis://b")
	b.Set("mysql", "m")
	if a.Get("redis") != "redis://a" || a.Get("mysql") != "" || b.Get("redis") != "redis://b" {
		t.Errorf("a = %v, b = %v", a.Map(), b.Map())
	}
	b.Set("redis", "")
	if _, ok := b.Map()["redis"]; ok {
		t.Errorf("an empty address is kept: %v", b.Map())
	}
}

func TestAttemptCost(t *testing.T) {
	if got := (scenarios.Backend{}).Cost(); got != scenarios.DefaultAttemptCost {
		t.Errorf("default cost %d", got)
	}
	if got := (scenarios.Backend{AttemptCost: 1}).Cost(); got != 1 {
		t.Errorf("declared cost %d", got)
	}
}
