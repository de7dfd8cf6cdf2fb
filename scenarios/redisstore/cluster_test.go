package redisstore_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/internal/wiretest"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/racetest/racetest/scenarios/runs"
)

// clusterURLEnv names the Redis Cluster the cluster tests use: the
// RACETEST_REDIS_URL that 'scripts/cluster.sh start redis-cluster' prints,
// under the name .ci/run gives it beside the other clusters' addresses.
const clusterURLEnv = "RACETEST_CLUSTER_REDIS_CLUSTER_URL"

// needCluster returns the cluster's URL and a cluster client for the test's
// own checks; without a cluster it skips, or fails under
// RACETEST_REQUIRE_CLUSTERS.
func needCluster(t *testing.T) (string, *redis.ClusterClient) {
	t.Helper()
	raw := os.Getenv(clusterURLEnv)
	absent := func(why string) {
		t.Helper()
		if os.Getenv("RACETEST_REQUIRE_CLUSTERS") != "" {
			t.Fatalf("no Redis Cluster (%s) and RACETEST_REQUIRE_CLUSTERS is set: start one with scripts/cluster.sh start redis-cluster and set %s to the URL it prints", why, clusterURLEnv)
		}
		t.Skipf("no Redis Cluster (%s): start one with scripts/cluster.sh start redis-cluster and set %s to the URL it prints (set RACETEST_REQUIRE_CLUSTERS=1 to make this a failure)", why, clusterURLEnv)
	}
	if raw == "" {
		absent(clusterURLEnv + " is not set")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", clusterURLEnv, err)
	}
	seeds := append(strings.Split(u.Host, ","), u.Query()["addr"]...)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, MaxRetries: -1})
	t.Cleanup(func() { cc.Close() })
	if err := cc.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		absent(err.Error())
	}
	return raw, cc
}

// primaryAddrs lists the cluster's primaries, sorted.
func primaryAddrs(t *testing.T, cc *redis.ClusterClient) []string {
	t.Helper()
	var mu sync.Mutex
	var out []string
	err := cc.ForEachMaster(context.Background(), func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, n.Options().Addr)
		return nil
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("the cluster's primaries: %v %v", out, err)
	}
	sort.Strings(out)
	return out
}

// clusterKeys lists, on every primary, the keys under prefix: each
// primary's address with its keys.
func clusterKeys(t *testing.T, cc *redis.ClusterClient, prefix string) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	out := map[string][]string{}
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error {
		var ks []string
		iter := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			ks = append(ks, iter.Val())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(ks) > 0 {
			sort.Strings(ks)
			out[n.Options().Addr] = ks
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClusterConformance: the catalog's expectations hold on a Redis
// Cluster as on one server — check-then-write RACE, conditional-update and
// unique-insert SAFE with exactly one effect per burst counted in the store,
// ttl-lease's liveness — with the last-byte release, and each run cleans up.
func TestClusterConformance(t *testing.T) {
	raw, _ := needCluster(t)
	conformance.Run(t, conformance.Suite{
		Registry: testenv.Registry(redisstore.Register),
		Backend:  redisstore.Name,
		Params:   scenarios.Params{Conn: scenarios.NewConnections(map[string]string{"redis": raw}), TTL: scenarios.DefaultTTL},
		Release:  wiretest.LastByte(redisstore.Name),
	})
}

// TestClusterRunInOneSlot: every key a run writes is in one hash slot, on
// the primary the report names, as the cluster itself computes it; cleanup
// leaves no key of the run on any primary.
func TestClusterRunInOneSlot(t *testing.T) {
	raw, cc := needCluster(t)
	ctx := context.Background()
	for _, sc := range []string{scenarios.CheckThenWrite, scenarios.ConditionalUpdate, scenarios.UniqueInsert, scenarios.TTLLease} {
		t.Run(sc, func(t *testing.T) {
			tg, p := build(t, sc, raw, 4, nil)
			res, err := runner.Run(ctx, tg, runner.Attempts(4), runner.Bursts(5), runner.Keep(true))
			if err != nil {
				t.Fatal(err)
			}
			on := clusterKeys(t, cc, p.Prefix())
			var keys []string
			for addr, ks := range on {
				for _, k := range ks {
					if k != runs.Marker(p.RunID) {
						keys = append(keys, k)
						if !strings.Contains(res.Server, "Redis Cluster") || !strings.Contains(strings.Join(res.Notes, "\n"), "served by the primary "+addr) {
							t.Errorf("key %s is on %s; the report says %q, %q", k, addr, res.Server, res.Notes)
						}
					}
				}
			}
			if len(keys) < 5 {
				t.Fatalf("kept %d keys of 5 bursts: %v", len(keys), on)
			}
			want, err := cc.ClusterKeySlot(ctx, "{"+p.RunID+"}").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if slot := cc.ClusterKeySlot(ctx, k).Val(); slot != want {
					t.Errorf("key %s in slot %d, the run's others in %d", k, slot, want)
				}
			}
			if err := tg.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if left := clusterKeys(t, cc, p.Prefix()); len(left) > 0 {
				t.Errorf("cleanup left keys: %v", left)
			}
		})
	}
}

// TestClusterNodeURL: a plain URL of one node is recognised as a cluster
// (INFO cluster says so) and used as one: without that, most keys would meet
// MOVED. The counts come from the store.
func TestClusterNodeURL(t *testing.T) {
	_, cc := needCluster(t)
	node := primaryAddrs(t, cc)[0] // any primary: the run's slot may be on another
	tg, p := build(t, scenarios.UniqueInsert, "redis://"+node+"/0", 4, nil)
	res, err := runner.Run(context.Background(), tg, runner.Attempts(4), runner.Bursts(20))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Server, "Redis Cluster of 3 primaries") {
		t.Errorf("Server() = %q: the cluster went unnoticed", res.Server)
	}
	for _, b := range res.Bursts {
		if b.Effects != 1 {
			t.Errorf("burst %d: %d effects, want 1 (outcomes %v, errors %v)", b.Index, b.Effects, b.Outcomes, res.Errors)
		}
	}
	if left := clusterKeys(t, cc, p.Prefix()); len(left) > 0 {
		t.Errorf("left keys: %v", left)
	}
	if _, err := testenv.Registry(redisstore.Register).Build(context.Background(), scenarios.UniqueInsert, redisstore.Name,
		scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 2, Conn: scenarios.NewConnections(map[string]string{"redis": "redis://" + node + "/1"})}); err == nil ||
		!strings.Contains(err.Error(), "database 0 only") {
		t.Errorf("database 1 of a cluster node: %v", err)
	}
}

// TestClusterClean: a run that died (its marker and keys left, spread over
// primaries) is found by clean's scan of every primary and dropped whole;
// a key no run registered is left alone.
func TestClusterClean(t *testing.T) {
	raw, cc := needCluster(t)
	ctx := context.Background()
	tg, p := build(t, scenarios.CheckThenWrite, raw, 3, nil)
	if _, err := runner.Run(ctx, tg, runner.Attempts(3), runner.Bursts(4), runner.Keep(true)); err != nil {
		t.Fatal(err)
	}
	// A key of the run outside its slot (as another version of racetest
	// might have left): on a primary other than the run's, if there is one.
	runNode, err := cc.MasterForKey(ctx, "{"+p.RunID+"}")
	if err != nil {
		t.Fatal(err)
	}
	var stray string
	for i := range 64 {
		k := p.Prefix() + "stray" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if n, err := cc.MasterForKey(ctx, k); err == nil && n.Options().Addr != runNode.Options().Addr {
			stray = k
			break
		}
	}
	if stray == "" {
		t.Fatal("no key name found on another primary")
	}
	if err := cc.Set(ctx, stray, "x", runs.KeyTTL).Err(); err != nil {
		t.Fatal(err)
	}
	foreign := "racetest_zz" + p.RunID[:4] + "_orphan" // named like a run's, registered by none
	if err := cc.Set(ctx, foreign, "x", runs.KeyTTL).Err(); err != nil {
		t.Fatal(err)
	}
	defer cc.Del(ctx, foreign)
	if on := clusterKeys(t, cc, p.Prefix()); len(on) < 2 {
		t.Fatalf("the left-over run is on %d primaries, want 2 or more: %v", len(on), on)
	}

	// clean given one node's plain URL still visits every primary.
	j, err := redisstore.Janitor(ctx, scenarios.NewConnections(map[string]string{"redis": "redis://" + primaryAddrs(t, cc)[0] + "/0"}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if !strings.Contains(j.Where(), "primaries") {
		t.Errorf("Where() = %q: does not name the primaries clean visits", j.Where())
	}
	left, err := j.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mine *runs.Leftover
	for i := range left {
		if left[i].RunID == p.RunID {
			mine = &left[i]
		}
		if strings.Contains(strings.Join(left[i].Objects, " "), foreign) && left[i].Registered {
			t.Errorf("an unregistered key counts as registered: %+v", left[i])
		}
	}
	if mine == nil || !mine.Registered || len(mine.Objects) != 5 || !contains(mine.Objects, stray) {
		t.Fatalf("clean found %+v, want the registered run with its 4 effect lists and %s", mine, stray)
	}
	what, err := j.Drop(ctx, p.RunID)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(what)
	if on := clusterKeys(t, cc, p.Prefix()); len(on) > 0 {
		t.Errorf("clean left keys of the run: %v", on)
	}
	if n := cc.Exists(ctx, foreign).Val(); n != 1 {
		t.Errorf("clean dropped %s, which no run registered", foreign)
	}
	if err := tg.Cleanup(ctx); err != nil {
		t.Errorf("cleanup after clean: %v", err)
	}
}

// TestClusterRefused: what does not run on a cluster says so, with exit 2's
// error class, for a plain URL of a node as for a seed URL.
func TestClusterRefused(t *testing.T) {
	raw, cc := needCluster(t)
	node := redis.NewClient(&redis.Options{Addr: primaryAddrs(t, cc)[0], MaxRetries: -1})
	defer node.Close()
	if err := redisstore.RefuseCluster(context.Background(), "redis://"+node.Options().Addr+"/0", node, "lost-update"); !isClusterRefusal(err, "lost-update") {
		t.Errorf("a cluster node: %v", err)
	}
	if err := redisstore.RefuseCluster(context.Background(), raw, nil, "lost-update"); !isClusterRefusal(err, "lost-update") {
		t.Errorf("a seed URL: %v", err)
	}
	var bad *scenarios.ParamError
	if err := redisstore.ClusterRefusal("x"); !errors.As(err, &bad) {
		t.Errorf("ClusterRefusal is not a ParamError: %T", err)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
