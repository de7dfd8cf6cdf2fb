package mongostore_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
	"github.com/racetest/racetest/scenarios/mongostore"
)

// server finds the MongoDB-compatible server the tests run against:
// RACETEST_MONGO_URI, else the standard local port. It skips the test (or
// fails it under RACETEST_REQUIRE_SERVERS) when none answers.
func server(t *testing.T) (scenarios.Params, mongostore.ServerInfo) {
	t.Helper()
	p := scenarios.Params{Conn: scenarios.Connections{MongoURI: os.Getenv("RACETEST_MONGO_URI")}, TTL: scenarios.DefaultTTL}
	info, err := probe(p)
	if err != nil {
		conformance.Unavailable(t, mongostore.Name, err)
	}
	t.Logf("server: %s", info)
	return p, info
}

var probeOnce struct {
	sync.Once
	info mongostore.ServerInfo
	err  error
}

func probe(p scenarios.Params) (mongostore.ServerInfo, error) {
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		probeOnce.info, probeOnce.err = mongostore.Probe(ctx, p)
	})
	return probeOnce.info, probeOnce.err
}

// registry holds the core scenarios on this backend alone, so that these
// tests do not depend on the other backends' packages.
func registry() *scenarios.Registry {
	r := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		r.AddScenario(s)
	}
	mongostore.Register(r)
	return r
}

// ferretRace is why a scenario races on FerretDB 1.x: measured in
// shared/mongodb-in-ci.md and again by these tests.
const ferretRace = "FerretDB 1.x performs findAndModify as read, change in Go, replace by _id: " +
	"the filter is not re-checked at write time, so several attempts match the same document"

func TestConformance(t *testing.T) {
	p, info := server(t)
	s := conformance.Suite{Registry: registry(), Backend: mongostore.Name, Params: p}
	if info.FerretDB() {
		s.Override = map[string]conformance.Override{
			scenarios.ConditionalUpdate: {Expect: scenarios.ExpectRace, Why: ferretRace},
			scenarios.TTLLease:          {Expect: scenarios.ExpectRace, Why: ferretRace},
		}
	}
	conformance.Run(t, s)
}
