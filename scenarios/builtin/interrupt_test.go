package builtin

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mongostore"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/racetest/racetest/scenarios/runs"
)

// phases are the moments of a run an interrupt lands in: while the target
// is built (it connects), in Prepare (it registers and creates), during a
// burst's attempts, while the effects are counted, and during Cleanup.
var phases = []string{"build", "prepare", "bursts", "effects", "cleanup"}

// interrupting wraps a target and cancels the run a random moment (0–3 ms)
// after it enters one phase, so that the cancel lands inside that phase's
// round trips to the server.
type interrupting struct {
	runner.Target
	phase  string
	burst  int // the burst whose attempts or count is interrupted
	delay  time.Duration
	cancel context.CancelFunc
	fired  atomic.Bool
}

func (w *interrupting) arm(phase string) {
	if phase == w.phase && w.fired.CompareAndSwap(false, true) {
		time.AfterFunc(w.delay, w.cancel)
	}
}

func (w *interrupting) Prepare(ctx context.Context) error {
	w.arm("prepare")
	return w.Target.Prepare(ctx)
}

func (w *interrupting) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	s, err := w.Target.Reset(ctx, burst)
	if burst == w.burst {
		w.arm("bursts")
	}
	return s, err
}

func (w *interrupting) Effects(ctx context.Context, s runner.Subject) (int, error) {
	if s.Burst == w.burst {
		w.arm("effects")
	}
	return w.Target.Effects(ctx, s)
}

func (w *interrupting) Cleanup(ctx context.Context) error {
	w.arm("cleanup")
	return w.Target.Cleanup(ctx)
}

// connections are the servers the tests use, from the environment.
func connections() scenarios.Connections {
	var c scenarios.Connections
	for _, b := range Registry().Backends() {
		if b.Conn != nil {
			c.Set(b.Conn.Key, os.Getenv(b.Conn.Env))
		}
	}
	return c
}

// janitorOf are the server backends' janitors, as each declares it.
var janitorOf = func() map[string]func(context.Context, scenarios.Connections) (runs.Janitor, error) {
	m := map[string]func(context.Context, scenarios.Connections) (runs.Janitor, error){}
	for _, b := range Registry().Backends() {
		if b.Janitor != nil {
			m[b.Name] = b.Janitor
		}
	}
	return m
}()

// Every scenario on every server backend, interrupted at random moments
// spread over the phases of a run, leaves nothing behind: no table, key or
// collection under its prefix, and no registration. RACETEST_INTERRUPTS
// sets the interrupts per scenario × backend (default 20; 4 with -short).
func TestInterruptsLeaveNothing(t *testing.T) {
	janitors := maps.Clone(janitorOf)
	if !testenv.Set("mongo") {
		// Without it the mongo backend would try the default port, where CI
		// runs no MongoDB (FerretDB is started by .ci/run, which sets it).
		t.Log("RACETEST_MONGO_URI is not set: mongo is left out")
		delete(janitors, mongostore.Name)
	}
	interruptAll(t, janitors, connections(), func(s scenarios.Spec) bool { return s.Topology == "" })
}

// The scenarios that need a cluster (replica-read, failover-lock), on the
// clusters scripts/cluster.sh started (.ci/run's cluster step sets
// RACETEST_CLUSTER_*): the same, with the run's objects looked for on the
// primary.
func TestInterruptsLeaveNothingOnClusters(t *testing.T) {
	// failover-lock kills nodes: go-redis would log each failed dial.
	redisdb.QuietDriverLog()
	conn := scenarios.NewConnections(map[string]string{"redis": os.Getenv("RACETEST_CLUSTER_REDIS_URL"), "redis_read": os.Getenv("RACETEST_CLUSTER_REDIS_READ_URL"), "mysql": os.Getenv("RACETEST_CLUSTER_MYSQL_DSN"), "mysql_read": os.Getenv("RACETEST_CLUSTER_MYSQL_READ_DSN"), "postgres": os.Getenv("RACETEST_CLUSTER_POSTGRES_URL"), "postgres_read": os.Getenv("RACETEST_CLUSTER_POSTGRES_READ_URL")})
	have := map[string]bool{
		redisstore.Name: conn.Get("redis_read") != "", mysqlstore.Name: conn.Get("mysql_read") != "", pgstore.Name: conn.Get("postgres_read") != "",
	}
	janitors := maps.Clone(janitorOf)
	delete(janitors, mongostore.Name) // no clustered scenario runs on it
	for name := range janitors {
		if !have[name] {
			if os.Getenv("RACETEST_REQUIRE_CLUSTERS") != "" {
				t.Errorf("no %s cluster and RACETEST_REQUIRE_CLUSTERS is set: start one with scripts/cluster.sh and set RACETEST_CLUSTER_*", name)
			}
			delete(janitors, name)
		}
	}
	if len(janitors) == 0 {
		t.Skip("no cluster: start them with scripts/cluster.sh and set RACETEST_CLUSTER_* to the addresses it prints (set RACETEST_REQUIRE_CLUSTERS=1 to make this a failure)")
	}
	interruptAll(t, janitors, conn, func(s scenarios.Spec) bool { return s.Topology != "" })
}

// The five built-in scenarios on the Redis Cluster scripts/cluster.sh
// started (RACETEST_CLUSTER_REDIS_CLUSTER_URL, set by .ci/run's cluster
// step): the same, with the run's keys looked for on every primary.
func TestInterruptsLeaveNothingOnRedisCluster(t *testing.T) {
	url := os.Getenv("RACETEST_CLUSTER_REDIS_CLUSTER_URL")
	if url == "" {
		if os.Getenv("RACETEST_REQUIRE_CLUSTERS") != "" {
			t.Fatal("no Redis Cluster and RACETEST_REQUIRE_CLUSTERS is set: start one with scripts/cluster.sh start redis-cluster and set RACETEST_CLUSTER_REDIS_CLUSTER_URL to the URL it prints")
		}
		t.Skip("no Redis Cluster: start one with scripts/cluster.sh start redis-cluster and set RACETEST_CLUSTER_REDIS_CLUSTER_URL to the URL it prints (set RACETEST_REQUIRE_CLUSTERS=1 to make this a failure)")
	}
	core := map[string]bool{}
	for _, s := range scenarios.Core() {
		core[s.Name] = true
	}
	janitors := map[string]func(context.Context, scenarios.Connections) (runs.Janitor, error){redisstore.Name: redisstore.Janitor}
	interruptAll(t, janitors, scenarios.NewConnections(map[string]string{"redis": url}), func(s scenarios.Spec) bool { return core[s.Name] })
}

// interruptAll interrupts each scenario that include selects, on each
// backend of janitors, per times (RACETEST_INTERRUPTS), and counts what
// was left.
func interruptAll(t *testing.T, janitors map[string]func(context.Context, scenarios.Connections) (runs.Janitor, error), conn scenarios.Connections, include func(scenarios.Spec) bool) {
	per := 20
	if testing.Short() {
		per = 4
	}
	if v := os.Getenv("RACETEST_INTERRUPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RACETEST_INTERRUPTS=%q: want a whole number ≥ 1", v)
		}
		per = n
	}
	reg := Registry()
	var total, left, pairs atomic.Int64
	for _, b := range reg.Backends() {
		open, ok := janitors[b.Name]
		if !ok {
			continue
		}
		jctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		j, err := open(jctx, conn)
		cancel()
		if err != nil {
			testenv.Unavailable(t, b.Name, err)
			continue
		}
		var jmu sync.Mutex
		t.Cleanup(func() { j.Close() })
		for _, spec := range reg.Scenarios() {
			if _, err := reg.Factory(spec.Name, b.Name); err != nil || !include(spec) {
				continue
			}
			pairs.Add(1)
			t.Run(spec.Name+"/"+b.Name, func(t *testing.T) {
				t.Parallel()
				for i := range per {
					phase := phases[i%len(phases)]
					runID := interruptOnce(t, reg, spec.Name, b.Name, conn, phase, i)
					total.Add(1)
					jmu.Lock()
					what := leftOf(t, j, runID)
					jmu.Unlock()
					if what != "" {
						left.Add(1)
						t.Errorf("interrupt %d (in %s) left %s", i, phase, what)
					}
				}
			})
		}
	}
	t.Cleanup(func() {
		t.Logf("%d scenario × backend pairs, %d interrupted runs (%d in each of the phases %v), %d left something behind",
			pairs.Load(), total.Load(), per/len(phases), phases, left.Load())
	})
}

// interruptOnce runs scenario on backend and interrupts it in phase; it
// returns the run's id.
func interruptOnce(t *testing.T, reg *scenarios.Registry, scenario, backend string, conn scenarios.Connections, phase string, i int) string {
	t.Helper()
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 4, Replicas: 1, Conn: conn, TTL: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	delay := time.Duration(rand.Int64N(int64(3 * time.Millisecond)))
	if phase == "build" {
		time.AfterFunc(delay, cancel)
	}
	target, err := reg.Build(ctx, scenario, backend, p)
	if err != nil {
		if ctx.Err() == nil {
			t.Fatalf("interrupt %d: build %s on %s: %v", i, scenario, backend, err)
		}
		return p.RunID
	}
	w := &interrupting{Target: target, phase: phase, burst: rand.IntN(3), delay: delay, cancel: cancel}
	_, _ = runner.Run(ctx, w, runner.Attempts(4), runner.Bursts(3), runner.Timeout(2*time.Second))
	if c, ok := target.(interface{ Close() error }); ok {
		c.Close()
	}
	return p.RunID
}

// leftOf says what run id left on j's server, or "".
func leftOf(t *testing.T, j runs.Janitor, runID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all, err := j.Leftovers(ctx)
	if err != nil {
		t.Fatalf("listing what runs left on %s: %v", j.Where(), err)
	}
	for _, l := range all {
		if l.RunID != runID {
			continue
		}
		// Drop it, so that a failure here does not become CI's leftover too.
		what := fmt.Sprintf("%v (registered: %v)", l.Objects, l.Registered)
		if l.Registered {
			j.Drop(ctx, runID)
		}
		return what
	}
	return ""
}
