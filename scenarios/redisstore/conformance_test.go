package redisstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/internal/wiretest"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// testURL is the server the tests use: RACETEST_REDIS_URL, or the default.
func testURL() string {
	if u := os.Getenv("RACETEST_REDIS_URL"); u != "" {
		return u
	}
	return redisdb.DefaultURL
}

// needServer skips (or, under RACETEST_REQUIRE_SERVERS, fails) when no
// Redis answers, and returns a client for the test's own checks.
func needServer(t *testing.T) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testURL())
	if err != nil {
		t.Fatalf("RACETEST_REDIS_URL: %v", err)
	}
	opt.MaxRetries = -1
	cl := redis.NewClient(opt)
	t.Cleanup(func() { cl.Close() })
	if err := cl.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(t, "redis", err)
	}
	return cl
}

// registry holds the core scenarios and this backend only, so that the
// package's tests do not depend on the other backends building.
func registry() *scenarios.Registry {
	r := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		r.AddScenario(s)
	}
	redisstore.Register(r)
	return r
}

func TestConformance(t *testing.T) {
	needServer(t)
	conformance.Run(t, conformance.Suite{
		Registry: registry(),
		Backend:  redisstore.Name,
		Params:   scenarios.Params{Conn: scenarios.NewConnections(map[string]string{"redis": testURL()}), TTL: scenarios.DefaultTTL},
		// A Redis attempt is one ~30µs round trip; under load the gate's spread
		// (100–300µs at N=8) left half the bursts without overlap, proving nothing.
		Release: wiretest.LastByte(redisstore.Name),
	})
}

func TestMain(m *testing.M) {
	// The driver logs failed dials to stderr; the tests provoke some on
	// purpose and read the errors this package returns instead.
	redisdb.QuietDriverLog()
	os.Exit(m.Run())
}
