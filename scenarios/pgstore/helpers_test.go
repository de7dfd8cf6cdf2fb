package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// serverParams returns a fresh run's parameters, or skips the test (fails
// it under RACETEST_REQUIRE_SERVERS) when no server answers.
func serverParams(t testing.TB) scenarios.Params {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, testenv.URL("postgres"))
	if err != nil {
		testenv.Unavailable(t, Name, err)
	}
	_ = c.Close(ctx)
	return scenarios.Params{
		RunID: scenarios.NewRunID(),
		Conn:  scenarios.NewConnections(map[string]string{"postgres": testenv.URL("postgres")}),
		TTL:   scenarios.DefaultTTL,
	}
}

// rawConn is a plain connection for the test's own looking, closed at the end.
func rawConn(t testing.TB) *pgx.Conn {
	t.Helper()
	return connTo(t, testenv.URL("postgres"))
}

// connTo is rawConn to the server at url.
func connTo(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func scenarioNamed(t testing.TB, name string) scenario {
	t.Helper()
	for _, sc := range catalog() {
		if sc.name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %s", name)
	return scenario{}
}

// build makes the target of scenario with p, as the registry would.
func build(t testing.TB, name string, p scenarios.Params) *target {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tg, err := factory(scenarioNamed(t, name))(ctx, p)
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return tg.(*target)
}

// run runs a target with the usual options for a test.
func run(t testing.TB, ctx context.Context, tg runner.Target, attempts, bursts int, opts ...runner.Option) *runner.Result {
	t.Helper()
	res, err := runner.Run(ctx, tg, append([]runner.Option{runner.Attempts(attempts), runner.Bursts(bursts)}, opts...)...)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.CleanupErr != nil {
		t.Fatalf("cleanup: %v", res.CleanupErr)
	}
	return res
}

// leftovers counts the relations (tables, indexes, sequences) whose name
// starts with prefix.
func leftovers(t testing.TB, c *pgx.Conn, prefix string) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*)::int FROM pg_class WHERE starts_with(relname, $1::text)", prefix).Scan(&n); err != nil {
		t.Fatalf("count leftovers: %v", err)
	}
	return n
}
