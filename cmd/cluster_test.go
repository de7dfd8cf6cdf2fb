package cmd

import (
	"os"
	"strings"
	"testing"

	"github.com/racetest/racetest/scenarios/builtin"
)

// requireClustersEnv makes the cluster-backed tests fail, not skip,
// without their clusters: .ci/run sets it after scripts/cluster.sh
// started them.
const requireClustersEnv = "RACETEST_REQUIRE_CLUSTERS"

// clusterFlags are the connection flags of the clusters scripts/cluster.sh
// started (their addresses in RACETEST_CLUSTER_*, as .ci/run exports
// them), or a skip naming what to start — a failure under
// RACETEST_REQUIRE_CLUSTERS.
func clusterFlags(t *testing.T, topologies ...string) []string {
	t.Helper()
	vars := map[string][][2]string{
		"postgres-replica": {{"postgres-url", "POSTGRES_URL"}, {"postgres-read-url", "POSTGRES_READ_URL"}},
		"mariadb-replica":  {{"mysql-dsn", "MYSQL_DSN"}, {"mysql-read-dsn", "MYSQL_READ_DSN"}},
		"redis-replica":    {{"redis-url", "REDIS_URL"}, {"redis-read-url", "REDIS_READ_URL"}},
	}
	var args []string
	for _, topo := range topologies {
		for _, v := range vars[topo] {
			val := os.Getenv("RACETEST_CLUSTER_" + v[1])
			if val == "" {
				msg := "no " + topo + " cluster: scripts/cluster.sh start " + topo + ", and set RACETEST_CLUSTER_* to the addresses it prints"
				if os.Getenv(requireClustersEnv) != "" {
					t.Fatal(msg + " (" + requireClustersEnv + " is set)")
				}
				t.Skip(msg)
			}
			args = append(args, "--"+v[0], val)
		}
	}
	return args
}

// noClusterEnv clears the RACETEST_* variables of the connections, so that
// the flags' defaults are empty whatever the machine exports.
func noClusterEnv(t *testing.T) {
	for _, b := range builtin.Registry().Backends() {
		if b.Conn != nil {
			t.Setenv(b.Conn.Env, "")
		}
		if b.ReadConn != nil {
			t.Setenv(b.ReadConn.Env, "")
		}
	}
}

// With no cluster named, demo --cluster runs nothing, names every row it
// skipped with the command that starts its cluster, and exits 3.
func TestDemoClusterSkipsWhatIsNotRunning(t *testing.T) {
	noClusterEnv(t)
	out, errOut, code := execWith(t, builtin.Registry(), "demo", "--cluster")
	if code != exitSetup {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitSetup, out, errOut)
	}
	for _, want := range []string{
		"skipped 2 rows of replica-read on postgres: no replica named (--postgres-read-url or RACETEST_POSTGRES_READ_URL)",
		`start it: eval "$(scripts/cluster.sh start postgres-replica)"`,
		"skipped 2 rows of replica-read on mysql", `scripts/cluster.sh start mariadb-replica`,
		"skipped 5 rows of failover-lock on redis", `scripts/cluster.sh start redis-replica`,
		"no cluster is running",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	// Named, but nothing listens there: "not running", not a failed row.
	_, errOut, code = execWith(t, builtin.Registry(), "demo", "--cluster", "-b", "redis",
		"--redis-url", "redis://127.0.0.1:1/0", "--redis-read-url", "redis://127.0.0.1:1/0")
	if code != exitSetup || !strings.Contains(errOut, "not running: nothing answers at 127.0.0.1:1") {
		t.Errorf("a dead port: exit %d, want %d and the address named\n%s", code, exitSetup, errOut)
	}
	// A replica without its primary: the shared server on the standard
	// port is never taken for a cluster's primary.
	_, errOut, _ = execWith(t, builtin.Registry(), "demo", "--cluster", "-b", "postgres", "--postgres-read-url", "postgres://postgres@127.0.0.1:1/test")
	if !strings.Contains(errOut, "no primary named (--postgres-url") {
		t.Errorf("a replica alone should be skipped for want of its primary:\n%s", errOut)
	}
	if _, errOut, code := execWith(t, builtin.Registry(), "demo", "--cluster", "-b", "mongo"); code != exitUsage || !strings.Contains(errOut, "failover-lock on redis") {
		t.Errorf("a backend without clustered scenarios: exit %d, want %d\n%s", code, exitUsage, errOut)
	}
}

// The plain demo leaves the clustered rows out: they need a replica.
func TestDemoLeavesClusteredRowsOut(t *testing.T) {
	noClusterEnv(t)
	out, errOut, code := execWith(t, builtin.Registry(), "demo", "-b", "redis", "-n", "2", "--bursts", "2", "-o", "json")
	if !strings.Contains(out, `"scenario": "alert-dedupe"`) || strings.Contains(out, `"scenario": "failover-lock"`) {
		t.Fatalf("exit %d: want the redis demo without failover-lock's rows (they need --cluster)\n%s", code, errOut)
	}
}

// demo --cluster on a real postgres-replica: both rows, each as the
// catalog says, exit 0.
func TestDemoClusterOnClusters(t *testing.T) {
	args := append([]string{"demo", "--cluster", "-b", "postgres", "-n", "4", "--bursts", "100"}, clusterFlags(t, "postgres-replica")...)
	out, errOut, code := execWith(t, builtin.Registry(), args...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"demo --cluster — 2 runs on postgres-replica", "replica-read (reads the replica)", "replica-read (unique key)", "race ok", "safe ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A suite names the replicas in connections: and runs the clustered
// scenarios with them, held to the catalog.
func TestSuiteOnClusters(t *testing.T) {
	flags := clusterFlags(t, "postgres-replica", "mariadb-replica", "redis-replica")
	val := map[string]string{}
	for i := 0; i < len(flags); i += 2 {
		val[strings.TrimPrefix(flags[i], "--")] = flags[i+1]
	}
	noClusterEnv(t)
	file := writeSuite(t, `defaults:
  attempts: 4
  connections:
    postgres: `+val["postgres-url"]+`
    postgres_read: `+val["postgres-read-url"]+`
    mysql: `+val["mysql-dsn"]+`
    mysql_read: `+val["mysql-read-dsn"]+`
    redis: `+val["redis-url"]+`
cases:
  - scenario: replica-read
    backend: postgres
    variant: conditional
    bursts: 20
  - scenario: replica-read
    backend: mysql
    variant: primary-read
    bursts: 20
  - scenario: failover-lock
    backend: redis
    variant: alert-claim
    read_connection: `+val["redis-read-url"]+`
    bursts: 3
  - scenario: failover-lock
    backend: redis
    variant: alert-claim
    fault: none
    read_connection: `+val["redis-read-url"]+`
    bursts: 3
`)
	out, errOut, code := execWith(t, builtin.Registry(), "suite", "--list", file)
	if code != exitOK || !strings.Contains(out, "replica "+strings.Split(val["postgres-read-url"], "?")[0]) || !strings.Contains(out, "(case)") {
		t.Fatalf("--list: exit %d, want each case's replica shown\n%s%s", code, out, errOut)
	}
	out, errOut, code = execWith(t, builtin.Registry(), "suite", file)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"[1/4] ok    replica-read (variant=conditional) on postgres", "[2/4] ok", "[3/4] ok    failover-lock (variant=alert-claim) on redis",
		"RACE 100% (3 of 3 bursts", "[4/4] ok    failover-lock (variant=alert-claim, fault=none) on redis"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("log lacks %q:\n%s", want, errOut)
		}
	}
}
