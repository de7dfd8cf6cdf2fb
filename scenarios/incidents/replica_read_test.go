package incidents

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// RequireClustersEnv makes the clustered tests fail, not skip, without a
// cluster: .ci/run sets it after scripts/cluster.sh started them.
const RequireClustersEnv = "RACETEST_REQUIRE_CLUSTERS"

// TestReplicaReadNeedsAReadEndpoint: without a replica's address the run is
// refused as a usage error that says how to get one, before any connection.
func TestReplicaReadNeedsAReadEndpoint(t *testing.T) {
	for _, b := range []string{"postgres", "mysql"} {
		t.Run(b, func(t *testing.T) {
			p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 2, Replicas: 1,
				Conn: scenarios.NewConnections(map[string]string{"mysql": "root@tcp(127.0.0.1:1)/none", "postgres": "postgres://nobody@127.0.0.1:1/none"})}
			_, err := registry(b).Build(context.Background(), ReplicaRead, b, p)
			var bad *scenarios.ParamError
			if !errors.As(err, &bad) {
				t.Fatalf("want a parameter error, got %v", err)
			}
			for _, want := range []string{"-read-", "scripts/cluster.sh start"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error should say %q: %v", want, err)
				}
			}
		})
	}
}

// TestReplicaReadRefusesAServerThatIsNotAReplica: a read endpoint that
// replicates from nothing would measure nothing; the run says so.
func TestReplicaReadRefusesAServerThatIsNotAReplica(t *testing.T) {
	for _, d := range []*dialect{pgDialect, mysqlDialect} {
		t.Run(d.name(), func(t *testing.T) {
			p, _ := needSQL(t, d)
			p.Attempts, p.Replicas = 2, 1
			// The shared server as its own "replica".
			p.Conn.Set("postgres_read", p.Conn.Get("postgres"))
			if p.Conn.Get("postgres_read") == "" {
				p.Conn.Set("postgres_read", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
			}
			p.Conn.Set("mysql_read", p.Conn.Get("mysql"))
			if p.Conn.Get("mysql_read") == "" {
				p.Conn.Set("mysql_read", "root@tcp(127.0.0.1:3306)/test")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := registry(d.name()).Build(ctx, ReplicaRead, d.name(), p)
			var bad *scenarios.ParamError
			if !errors.As(err, &bad) || !strings.Contains(err.Error(), "not a replica") && !strings.Contains(err.Error(), "replicates from nothing") {
				t.Fatalf("want the endpoint refused as no replica, got %v", err)
			}
		})
	}
}

// needCluster returns params that reach a primary and its replica
// (scripts/cluster.sh's addresses in the environment), or skips — fails
// under RACETEST_REQUIRE_CLUSTERS.
func needCluster(t *testing.T, d *dialect) scenarios.Params {
	t.Helper()
	p := scenarios.Params{RunID: scenarios.NewRunID(), Conn: scenarios.NewConnections(map[string]string{"mysql": os.Getenv("RACETEST_CLUSTER_MYSQL_DSN"), "mysql_read": os.Getenv("RACETEST_CLUSTER_MYSQL_READ_DSN"), "postgres": os.Getenv("RACETEST_CLUSTER_POSTGRES_URL"), "postgres_read": os.Getenv("RACETEST_CLUSTER_POSTGRES_READ_URL")})}
	read := p.Conn.Get("postgres_read")
	if d == mysqlDialect {
		read = p.Conn.Get("mysql_read")
	}
	if read == "" {
		msg := "no " + d.name() + " cluster: start one with scripts/cluster.sh and set RACETEST_CLUSTER_" + strings.ToUpper(d.name()) + "_* to the addresses it prints"
		if os.Getenv(RequireClustersEnv) != "" {
			t.Fatal(msg + " (" + RequireClustersEnv + " is set)")
		}
		t.Skip(msg)
	}
	return p
}

// TestReplicaReadOnACluster: the naive code runs twice through a real
// replica, each fix exactly once; counts are the primary's rows.
func TestReplicaReadOnACluster(t *testing.T) {
	for _, d := range []*dialect{pgDialect, mysqlDialect} {
		t.Run(d.name(), func(t *testing.T) {
			p := needCluster(t, d)
			for _, v := range replicaVariants[d.name()] {
				t.Run(v, func(t *testing.T) {
					// 4 attempts × 100 bursts: three hand-overs of the lock per
					// burst, each a chance for the replica to lag; the naive
					// form's rate here was 8-90% per burst at load 12-21, and
					// 5.5-15% at load 2-4 with two busy loops beside it. Under
					// -race, slower, PostgreSQL's was about 0.7%: the first
					// race came in burst 26-242 in 5 runs, and .ci/run once
					// saw none in 100. The naive form runs until its first
					// race, up to 3,000 bursts: at 0.7% a miss in 7e-10 runs.
					sh := shape{variant: v, attempts: 4, bursts: 100}
					if v == Naive {
						sh.bursts, sh.stopAtRace = 3000, true
					}
					res, _ := runCase(t, d.name(), ReplicaRead, p, sh)
					if v == Naive {
						if res.Violations() == 0 {
							t.Fatalf("naive: no burst over 1 effect in %d; the replica never lagged?", len(res.Bursts))
						}
						t.Logf("naive: the first race came in burst %d", len(res.Bursts))
						return
					}
					everyBurst(t, res, "exactly one claim on the primary", func(b runner.Burst) bool { return b.Effects == 1 })
				})
			}
		})
	}
}

// TestFailoverLockRefusesWhatClusterShDidNotStart: racetest kills and
// promotes servers only in a cluster scripts/cluster.sh started; the shared
// server, named as both primary and replica, is refused before anything.
func TestFailoverLockRefusesWhatClusterShDidNotStart(t *testing.T) {
	_, cl := needRedis(t)
	url := "redis://" + cl.Options().Addr + "/0"
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 2, Replicas: 1,
		Conn: scenarios.NewConnections(map[string]string{"redis": url, "redis_read": url})}
	_, err := registry("redis").Build(context.Background(), FailoverLock, "redis", p)
	var bad *scenarios.ParamError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "runs only on a cluster that scripts/cluster.sh started") {
		t.Fatalf("want the shared server refused, got %v", err)
	}
	p.Conn.Set("redis_read", "")
	if _, err := registry("redis").Build(context.Background(), FailoverLock, "redis", p); !errors.As(err, &bad) || !strings.Contains(err.Error(), "scripts/cluster.sh start redis-replica") {
		t.Fatalf("without a replica, want a usage error naming scripts/cluster.sh, got %v", err)
	}
}

// TestFailoverLockOnACluster: with a real failover in every burst, the
// naive lease has two holders in every burst; WAIT and a fencing token
// checked by the resource leave exactly one write.
func TestFailoverLockOnACluster(t *testing.T) {
	primary, replica := os.Getenv("RACETEST_CLUSTER_REDIS_URL"), os.Getenv("RACETEST_CLUSTER_REDIS_READ_URL")
	if replica == "" {
		msg := "no redis-replica cluster: scripts/cluster.sh start redis-replica, and set RACETEST_CLUSTER_REDIS_URL and RACETEST_CLUSTER_REDIS_READ_URL to the URLs it prints"
		if os.Getenv(RequireClustersEnv) != "" {
			t.Fatal(msg + " (" + RequireClustersEnv + " is set)")
		}
		t.Skip(msg)
	}
	p := scenarios.Params{RunID: scenarios.NewRunID(), Conn: scenarios.NewConnections(map[string]string{"redis": primary, "redis_read": replica})}
	for _, v := range failoverVariants {
		t.Run(v, func(t *testing.T) {
			res, target := runCase(t, "redis", FailoverLock, p, shape{variant: v, attempts: 2, bursts: 5})
			notes := strings.Join(target.(*failoverTarget).Notes(), "; ")
			if !strings.Contains(notes, "5 failovers injected") {
				t.Fatalf("want a failover in each of 5 bursts: %s", notes)
			}
			if slices.Contains(racesUnderFailover, v) {
				everyBurst(t, res, "two holders, two writes (or alerts)", func(b runner.Burst) bool { return b.Effects == 2 })
				return
			}
			everyBurst(t, res, "exactly one write", func(b runner.Burst) bool { return b.Effects == 1 })
		})
	}
}

// A burst in which the promised failover did not happen tested nothing of
// the fix: the run cannot read SAFE on it.
func TestFailoverLockWithoutItsFaultIsInconclusive(t *testing.T) {
	tg := &failoverTarget{fault: FaultFailoverAfterAct, failovers: 1, bursts: 2}
	cs := tg.Checks(context.Background())
	if len(cs) != 1 || cs[0].OK || !cs[0].Inconclusive {
		t.Fatalf("1 failover in 2 bursts: want an inconclusive check, got %+v", cs)
	}
	tg.failovers = 2
	if cs := tg.Checks(context.Background()); len(cs) != 1 || !cs[0].OK {
		t.Fatalf("a failover in every burst: want the check ok, got %+v", cs)
	}
	if cs := (&failoverTarget{fault: FaultNone, bursts: 2}).Checks(context.Background()); len(cs) != 0 {
		t.Fatalf("--fault none promises no failover: want no check, got %+v", cs)
	}
}

// failover-lock's expectations: the variants that trust a grant only the
// primary acknowledged race under the fault, the others hold; without the
// fault everything holds. The alert claim is held to the same rule.
func TestFailoverLockExpectations(t *testing.T) {
	spec := failoverSpec()
	for _, tc := range []struct {
		variant, fault string
		want           scenarios.Expectation
	}{
		{"", "", scenarios.ExpectRace},
		{Naive, FaultFailoverAfterAct, scenarios.ExpectRace},
		{AlertClaim, "", scenarios.ExpectRace},
		{AlertClaim, FaultFailoverAfterAct, scenarios.ExpectRace},
		{AlertClaim, FaultNone, scenarios.ExpectSafe},
		{AlertClaimWait, "", scenarios.ExpectSafe},
		{WaitReplica, "", scenarios.ExpectSafe},
		{FencedWrite, "", scenarios.ExpectSafe},
		{Naive, FaultNone, scenarios.ExpectSafe},
	} {
		if got := spec.Expect(scenarios.Params{Variant: tc.variant, Fault: tc.fault}); got != tc.want {
			t.Errorf("variant %q, fault %q: expect %s, want %s", tc.variant, tc.fault, got, tc.want)
		}
	}
	for _, d := range spec.Demo {
		if !slices.Contains(failoverVariants, d.Variant) || d.Bursts == 0 {
			t.Errorf("demo row %+v: want a variant of failover-lock and a cap on its bursts", d)
		}
	}
}

// The topology line says what a commit waits for, not only the standby's
// listed state: a standby listed as synchronous under synchronous_commit =
// local waits for nothing.
func TestPGReplicationWording(t *testing.T) {
	for _, c := range []struct{ states, commit, want string }{
		{"async", "on", "replication asynchronous"},
		{"sync", "local", "replication asynchronous for commits (synchronous_commit = local;"},
		{"sync", "off", "replication asynchronous for commits (synchronous_commit = off;"},
		{"quorum,async", "on", "replication synchronous (synchronous_commit = on: a commit waits for the replica's copy"},
		{"sync", "remote_apply", "replication synchronous (synchronous_commit = remote_apply"},
		{"", "on", "replication unknown"},
		{"sync", "", "replication sync (synchronous_commit unknown)"},
	} {
		if got := pgReplication(c.states, c.commit); !strings.HasPrefix(got, c.want) {
			t.Errorf("sync_state %q, synchronous_commit %q: %q, want it to start %q", c.states, c.commit, got, c.want)
		}
	}
}

// A replica whose lag was set (scripts/cluster.sh's recovery_min_apply_delay)
// says so in the topology line; one without a delay adds nothing.
func TestApplyDelayWording(t *testing.T) {
	for setting, want := range map[string]string{
		"":    "",
		"0":   "",
		"1ms": ", applying each commit 1ms after the primary made it (recovery_min_apply_delay, a lag set on purpose)",
	} {
		if got := applyDelay(setting); got != want {
			t.Errorf("recovery_min_apply_delay %q: %q, want %q", setting, got, want)
		}
	}
}
