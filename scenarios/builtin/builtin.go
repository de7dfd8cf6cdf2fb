// Package builtin assembles racetest's shipped catalog: the one place that
// lists every built-in scenario and backend.
package builtin

import (
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/anomalies"
	"github.com/racetest/racetest/scenarios/incidents"
	"github.com/racetest/racetest/scenarios/memstore"
	"github.com/racetest/racetest/scenarios/mongostore"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// Registry returns a registry holding every built-in scenario on every
// backend that implements it.
func Registry() *scenarios.Registry {
	r := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		r.AddScenario(s)
	}
	memstore.Register(r)
	redisstore.Register(r)
	mysqlstore.Register(r)
	pgstore.Register(r)
	mongostore.Register(r)
	incidents.Register(r)
	anomalies.Register(r)
	return r
}
