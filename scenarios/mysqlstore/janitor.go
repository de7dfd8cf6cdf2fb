package mysqlstore

import (
	"context"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// Janitor connects to the server of c for 'racetest clean'.
func Janitor(ctx context.Context, c scenarios.Connections) (runs.Janitor, error) {
	return runs.SQLJanitor(ctx, runs.MySQL, c.Get(Name))
}
