package memstore_test

import (
	"testing"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/conformance"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Suite{
		Registry: builtin.Registry(),
		Backend:  "memory",
		Params:   scenarios.Params{Latency: scenarios.DefaultLatency, TTL: scenarios.DefaultTTL},
	})
}
