// Package testenv is where racetest's tests find their servers: each
// backend's server from its RACETEST_* environment variable (or the default
// a run uses), and the one rule for a server that is not there — the test
// is skipped, saying which server and which variable, or fails when
// RACETEST_REQUIRE_SERVERS is set (CI sets it, so that it cannot pass by
// skipping). Tests import it; nothing else does.
//
// It opens SQL servers through internal/sqldb, so sqldb's own tests cannot
// import it: they read the same variables in their one open helper.
package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios"
)

// RequireEnv names the environment variable that turns "server absent,
// skipping" into a failure.
const RequireEnv = "RACETEST_REQUIRE_SERVERS"

// The backends whose servers tests reach, by the names the registry gives
// them, with each one's variable and the server a run uses without it.
var servers = map[string]struct{ env, def string }{
	"mysql":    {"RACETEST_MYSQL_DSN", sqldb.DefaultMySQLDSN},
	"postgres": {"RACETEST_POSTGRES_URL", sqldb.DefaultPostgresURL},
	"redis":    {"RACETEST_REDIS_URL", redisdb.DefaultURL},
	"mongo":    {"RACETEST_MONGO_URI", mongodb.DefaultURI},
}

func server(backend string) struct{ env, def string } {
	s, ok := servers[backend]
	if !ok {
		panic("testenv: no test server for backend " + backend)
	}
	return s
}

// Env names the environment variable of backend's test server
// ("RACETEST_POSTGRES_URL" for "postgres").
func Env(backend string) string { return server(backend).env }

// Conn is backend's test server as its variable sets it: "" when unset,
// which a run reads as the backend's default.
func Conn(backend string) string { return os.Getenv(server(backend).env) }

// URL is backend's test server: its variable, or the default a run uses.
func URL(backend string) string {
	if c := Conn(backend); c != "" {
		return c
	}
	return server(backend).def
}

// Set reports whether backend's variable is set: a test that runs only
// where a server is configured (MongoDB, which CI starts apart) asks this.
func Set(backend string) bool { return Conn(backend) != "" }

// Conns is the connections of a run on the named backends' test servers.
func Conns(backends ...string) scenarios.Connections {
	m := make(map[string]string, len(backends))
	for _, b := range backends {
		m[b] = Conn(b)
	}
	return scenarios.NewConnections(m)
}

// Required reports whether RequireEnv is set: a server or a tool a test
// needs must then be there.
func Required() bool { return os.Getenv(RequireEnv) != "" }

// Unavailable skips t because backend's server cannot be reached (err says
// why; nil when a command's exit code said it), or fails it under
// RequireEnv. backend may be a backend's name, then the message says which
// variable to set, or words for several ("mysql or postgres").
func Unavailable(t testing.TB, backend string, err error) {
	t.Helper()
	where := ""
	if s, ok := servers[backend]; ok {
		where = " (set " + s.env + " to reach one"
		if !Set(backend) {
			where += "; unset, the default is " + s.def
		}
		where += ")"
	}
	if Required() {
		t.Fatalf("%s server unavailable%s and %s is set: %v", backend, where, RequireEnv, err)
	}
	t.Skipf("%s server unavailable%s, skipping (set %s=1 to make this a failure): %v", backend, where, RequireEnv, err)
}

// Missing skips t because something it needs besides a server (a browser,
// a program) is not there, or fails it under RequireEnv; what says what is
// missing and how to get it.
func Missing(t testing.TB, what string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s, and %s is set", what, RequireEnv)
	}
	t.Skipf("%s, skipping (set %s=1 to make this a failure)", what, RequireEnv)
}

// connectTimeout bounds opening a test server: a refused connection fails
// at once, a server slow under load gets its time.
const connectTimeout = 10 * time.Second

// SQL opens d's test server through internal/sqldb, as a run does, and
// closes it when the test ends; without the server, Unavailable.
func SQL(t testing.TB, d sqldb.Dialect) *sqldb.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	db, err := sqldb.Open(ctx, d, Conn(string(d)), sqldb.Options{})
	if err != nil {
		Unavailable(t, string(d), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Registry is the catalog's core scenarios and what each register adds (a
// backend's Register): a package's tests build its backend alone, and do
// not depend on the other backends' packages.
func Registry(register ...func(*scenarios.Registry)) *scenarios.Registry {
	r := scenarios.NewRegistry()
	for _, s := range scenarios.Core() {
		r.AddScenario(s)
	}
	for _, add := range register {
		add(r)
	}
	return r
}

// Family is a family's scenarios (register is its Register) on the named
// backends only, each declared by its name: a backend's tests then run the
// family's scenarios and not the core five again.
func Family(register func(*scenarios.Registry), backends ...string) *scenarios.Registry {
	r := scenarios.NewRegistry()
	for _, b := range backends {
		r.AddBackend(scenarios.Backend{Name: b, Server: b != "memory"})
	}
	register(r)
	return r
}
