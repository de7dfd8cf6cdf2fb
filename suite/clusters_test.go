package suite_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/suite"
)

// clustered is registry() plus a stand-in for a scenario that needs a
// replica (as replica-read and failover-lock do) on every server backend
// that declares a read endpoint.
func clustered() *scenarios.Registry {
	r := registry()
	r.AddScenario(scenarios.Spec{Name: "replica-read", Topology: scenarios.TopologyReplica,
		Expect: func(scenarios.Params) scenarios.Expectation { return scenarios.ExpectRace }})
	for _, b := range r.Backends() {
		if b.ReadConn != nil {
			r.Register("replica-read", b.Name, func(context.Context, scenarios.Params) (runner.Target, error) {
				return nil, errors.New("stand-in")
			})
		}
	}
	return r
}

func clusterPlans(t *testing.T, src string, o suite.Options) ([]suite.Plan, error) {
	t.Helper()
	s, err := parse(t, src, nil)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return s.Plans(clustered(), o)
}

// A replica's address is set the way the primary's is: the case's own,
// the command line, the suite's defaults (<backend>_read), the
// environment; the first wins, and --list shows it redacted.
func TestReadConnections(t *testing.T) {
	const head = "defaults:\n  connections:\n    postgres: postgres://u@p/db\n"
	const kase = "cases:\n  - scenario: replica-read\n    backend: postgres\n"
	readEnv := env(map[string]string{"RACETEST_POSTGRES_READ_URL": "postgres://u:pw@env/db"})
	for _, tc := range []struct {
		name, src     string
		o             suite.Options
		read, source  string
		shown, absent string
	}{
		{"suite defaults", head + "    postgres_read: postgres://u:pw@r/db\n" + kase, suite.Options{Env: readEnv},
			"postgres://u:pw@r/db", "suite defaults", "postgres://u:xxxxx@r/db", "pw"},
		{"env", head + kase, suite.Options{Env: readEnv}, "postgres://u:pw@env/db", "env RACETEST_POSTGRES_READ_URL", "postgres://u:xxxxx@env/db", "pw"},
		{"flag beats file", head + "    postgres_read: postgres://r/db\n" + kase,
			suite.Options{Conn: scenarios.NewConnections(map[string]string{"postgres_read": "postgres://flag/db"})}, "postgres://flag/db", "--postgres-read-url", "postgres://flag/db", ""},
		{"case wins", head + "    postgres_read: postgres://r/db\n" + kase + "    read_connection: postgres://case/db\n",
			suite.Options{Conn: scenarios.NewConnections(map[string]string{"postgres_read": "postgres://flag/db"})}, "postgres://case/db", "case", "postgres://case/db", ""},
		{"mysql", "defaults:\n  connections:\n    mysql: root@tcp(p:1)/t\n    mysql_read: root@tcp(r:2)/t\ncases:\n  - scenario: replica-read\n    backend: mysql\n",
			suite.Options{}, "root@tcp(r:2)/t", "suite defaults", "root@tcp(r:2)/t", ""},
		{"redis", "defaults:\n  connections:\n    redis: redis://p:1/0\n    redis_read: redis://r:2/0\ncases:\n  - scenario: replica-read\n    backend: redis\n",
			suite.Options{}, "redis://r:2/0", "suite defaults", "redis://r:2/0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := clusterPlans(t, tc.src, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			c := ps[0].Params.Conn
			got := map[string]string{"postgres": c.Get("postgres_read"), "mysql": c.Get("mysql_read"), "redis": c.Get("redis_read")}[ps[0].Case.Backend]
			if got != tc.read || ps[0].ReadConn.Source != tc.source || ps[0].ReadConn.Value != tc.shown {
				t.Errorf("got %q from %q shown as %q, want %q from %q shown as %q", got, ps[0].ReadConn.Source, ps[0].ReadConn.Value, tc.read, tc.source, tc.shown)
			}
			if tc.absent != "" && strings.Contains(ps[0].ReadConn.Value, tc.absent) {
				t.Errorf("password shown: %s", ps[0].ReadConn.Value)
			}
		})
	}
	t.Run("a single-server case gets no replica", func(t *testing.T) {
		ps, err := clusterPlans(t, head+"    postgres_read: postgres://r/db\ncases:\n  - scenario: unique-insert\n    backend: postgres\n", suite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if ps[0].Params.Conn.Get("postgres_read") != "" || ps[0].ReadConn != (suite.Conn{}) {
			t.Errorf("unique-insert runs on one server, yet got the replica %q (%+v)", ps[0].Params.Conn.Get("postgres_read"), ps[0].ReadConn)
		}
	})
}

func TestReadConnectionErrors(t *testing.T) {
	const head = "defaults:\n  connections:\n    postgres: postgres://u@p/db\n"
	for _, tc := range []struct {
		name, src string
		line, col int
		msgs      []string
	}{
		{"none configured", head + "cases:\n  - scenario: replica-read\n    backend: postgres\n", 6, 14,
			[]string{"reads a replica", "defaults.connections.postgres_read", "RACETEST_POSTGRES_READ_URL", "--postgres-read-url", "scripts/cluster.sh start postgres-replica"}},
		{"mysql names its cluster", "defaults:\n  connections: {mysql: default}\ncases:\n  - scenario: replica-read\n    backend: mysql\n", 5, 14,
			[]string{"mysql_read", "scripts/cluster.sh start mariadb-replica"}},
		{"default is no replica", head + "    postgres_read: default\ncases:\n  - scenario: replica-read\n    backend: postgres\n", 6, 5,
			[]string{`suite defaults names the replica "default"`, "a replica has no standard local address"}},
		{"read_connection on one server", head + "cases:\n  - scenario: unique-insert\n    backend: postgres\n    read_connection: postgres://r/db\n", 7, 22,
			[]string{"unique-insert on postgres reads no replica"}},
		{"read_connection on memory", "cases:\n  - scenario: unique-insert\n    read_connection: x\n", 3, 22, []string{"takes no connection"}},
		{"fault in defaults", "defaults:\n  fault: none\ncases:\n  - scenario: unique-insert\n", 2, 10, []string{"move it into the case"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := clusterPlans(t, tc.src, suite.Options{})
			e := firstError(t, err)
			for _, m := range tc.msgs {
				if !strings.Contains(e.Msg, m) {
					t.Errorf("the error should say %q: %v", m, e)
				}
			}
			if e.Line != tc.line || e.Column != tc.col {
				t.Errorf("at %d:%d, want %d:%d: %v", e.Line, e.Column, tc.line, tc.col, e)
			}
		})
	}
}

// A case's fault reaches the scenario, and names the case.
func TestCaseFault(t *testing.T) {
	ps, err := clusterPlans(t, "defaults:\n  connections: {redis: redis://p:1/0, redis_read: redis://r:2/0}\ncases:\n  - scenario: replica-read\n    backend: redis\n    fault: none\n", suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Params.Fault != "none" || ps[0].Case.Name != "replica-read (fault=none)" {
		t.Errorf("got fault %q in case %q", ps[0].Params.Fault, ps[0].Case.Name)
	}
}
