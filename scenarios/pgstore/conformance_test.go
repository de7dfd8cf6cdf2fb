package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/conformance"
	"github.com/racetest/racetest/scenarios/pgstore"
)

// requireServer skips (or, under RACETEST_REQUIRE_SERVERS, fails) when no
// server answers, by building one target the way a run does.
func requireServer(t *testing.T) scenarios.Params {
	t.Helper()
	p := scenarios.Params{RunID: scenarios.NewRunID(), Conn: scenarios.NewConnections(map[string]string{"postgres": testenv.URL("postgres")})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := builtin.Registry().Build(ctx, scenarios.UniqueInsert, pgstore.Name, p); err != nil {
		testenv.Unavailable(t, pgstore.Name, err)
	}
	return scenarios.Params{Conn: p.Conn, TTL: scenarios.DefaultTTL}
}

func TestConformance(t *testing.T) {
	p := requireServer(t)
	conformance.Run(t, conformance.Suite{Registry: builtin.Registry(), Backend: pgstore.Name, Params: p})
}
