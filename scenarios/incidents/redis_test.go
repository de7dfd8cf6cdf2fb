package incidents

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/internal/wiretest"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
	"github.com/racetest/racetest/scenarios/runs"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial to stderr; the fail-open tests dial a
	// dead port on purpose.
	redisdb.QuietDriverLog()
	os.Exit(m.Run())
}

// needRedis skips (or fails, under RACETEST_REQUIRE_SERVERS) without a
// Redis, and returns the params to reach it and a client for the test's own
// look at the keys.
func needRedis(t *testing.T) (scenarios.Params, *redis.Client) {
	t.Helper()
	p := scenarios.Params{Conn: testenv.Conns("redis"), TTL: scenarios.DefaultTTL}
	srv, err := parseRedis(p)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := srv.connect(context.Background())
	if err != nil {
		testenv.Unavailable(t, "redis", err)
	}
	t.Cleanup(func() { cl.Close() })
	return p, cl
}

func TestConformanceRedis(t *testing.T) {
	p, _ := needRedis(t)
	// The last-byte release, as a run's default on redis: a Redis round trip
	// takes ~30 µs, and under load the gate's spread (0.15–2.3 ms) left
	// job-window's claimed window without overlap in 8 of 15 bursts.
	conformance.Run(t, conformance.Suite{Registry: registry("redis"), Backend: "redis", Params: p, Bursts: 15,
		Release: wiretest.LastByte("redis")})
}

// TestRedisHungServerFailsOpenAtTheDeadline points the replicas at a
// listener that accepts and never answers: each replica's claim gives up at
// the 1.5 s deadline and sends, allowed by policy.
func TestRedisHungServerFailsOpenAtTheDeadline(t *testing.T) {
	p, _ := needRedis(t)
	res, _ := runCase(t, "redis", AlertDedupe, p, shape{variant: FailOpenHang, replicas: 2, attempts: 4, bursts: 3})
	// Three bursts: a later burst must meet the silence again, not a
	// connection already known dead. A burst cannot end before the
	// deadline; had the driver's own 5 s read timeout governed instead
	// (ContextTimeoutEnabled off), it could not end before that. The gap is
	// 3.5 s, far wider than any scheduling noise: this says which timeout
	// fired, it is not a benchmark.
	everyBurst(t, res, "want 2 sends allowed by policy, ended by the 1.5 s deadline", func(b runner.Burst) bool {
		return b.Effects == 2 && b.Allowed == 2 && b.Duration >= ClaimDeadline && b.Duration < redisReadTimeout
	})
	noteWith(t, res, "did not answer within the 1.5s deadline")
}

// TestRedisReadTimeoutDefault pins the driver default the hung-store check
// compares against.
func TestRedisReadTimeoutDefault(t *testing.T) {
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer cl.Close()
	if got := cl.Options().ReadTimeout; got != redisReadTimeout {
		t.Errorf("go-redis default ReadTimeout is %s; the hung-store check says %s", got, redisReadTimeout)
	}
}

func TestRedisAlertAndJob(t *testing.T) {
	p, _ := needRedis(t)
	t.Run("alert naive sends per replica and per deploy", func(t *testing.T) {
		res, _ := runCase(t, "redis", AlertDedupe, p, shape{variant: Naive, replicas: 3, waves: 2, deploy: true})
		everyBurst(t, res, "want 6 sends", func(b runner.Burst) bool { return b.Effects == 6 })
	})
	t.Run("alert claimed in Redis is sent once across deploys", func(t *testing.T) {
		res, _ := runCase(t, "redis", AlertDedupe, p, shape{variant: Fixed, replicas: 3, waves: 2, deploy: true})
		everyBurst(t, res, "want 1 send", func(b runner.Burst) bool { return b.Effects == 1 })
		checkOK(t, res, "a freshly started replica sees the claim")
	})
	t.Run("dead port fails open", func(t *testing.T) {
		res, _ := runCase(t, "redis", AlertDedupe, p, shape{variant: FailOpen, replicas: 3})
		everyBurst(t, res, "want 3 sends, all allowed", func(b runner.Burst) bool {
			return b.Effects == 3 && b.Allowed == 3 && b.Outcomes[runner.Error] == 0
		})
		noteWith(t, res, "Redis at a dead port")
		checkOK(t, res, "a hung store")
	})
	t.Run("job window claimed once, store down runs", func(t *testing.T) {
		res, _ := runCase(t, "redis", JobWindow, p, shape{variant: Fixed, replicas: 3, waves: 2, deploy: true})
		everyBurst(t, res, "want 1 listing", func(b runner.Burst) bool { return b.Effects == 1 })
		checkOK(t, res, "a late runner")
		res, _ = runCase(t, "redis", JobWindow, p, shape{variant: StoreDown, replicas: 3})
		everyBurst(t, res, "want 3 listings, all allowed", func(b runner.Burst) bool { return b.Effects == 3 && b.Allowed == 3 })
	})
}

func TestRedisLeasePause(t *testing.T) {
	p, _ := needRedis(t)
	res, _ := runCase(t, "redis", LeasePause, p, shape{variant: Fenced, bursts: 10})
	everyBurst(t, res, "fenced: want exactly 1 write", func(b runner.Burst) bool { return b.Effects == 1 })
	checkOK(t, res, "a plain delete frees the next holder's lease")
	checkOK(t, res, "compare-and-delete leaves the next holder's lease")
	res, _ = runCase(t, "redis", LeasePause, p, shape{variant: Naive, bursts: 10})
	if v := res.Violations(); v*2 < len(res.Bursts) {
		t.Errorf("naive: only %d of %d bursts wrote twice", v, len(res.Bursts))
	}
}

func TestFencingMustCoverTheCheckRedis(t *testing.T) {
	p, _ := needRedis(t)
	p.RunID = scenarios.NewRunID()
	lb, err := redisLeaseBackend(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	fencingInterleaving(t, lb, p)
}

// TestRedisTouchesOnlyItsKeys checks that a run leaves none of its keys and
// leaves a key outside its prefix alone.
func TestRedisTouchesOnlyItsKeys(t *testing.T) {
	p, cl := needRedis(t)
	ctx := context.Background()
	bystander := "racetest_bystander_" + scenarios.NewRunID()
	if err := cl.Set(ctx, bystander, "keep", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	defer cl.Del(ctx, bystander)
	for _, sc := range []struct{ name, variant string }{{AlertDedupe, Fixed}, {JobWindow, Fixed}, {LeasePause, Fenced}} {
		pp := p
		pp.RunID, pp.Variant = scenarios.NewRunID(), sc.variant
		target, err := registry("redis").Build(ctx, sc.name, "redis", pp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runner.Run(ctx, target, runner.Attempts(4), runner.Bursts(3), runner.Replicas(2))
		if err != nil || res.CleanupErr != nil {
			t.Fatalf("%s: run %v, cleanup %v", sc.name, err, res.CleanupErr)
		}
		target.(runner.Closer).Close()
		left, err := cl.Keys(ctx, pp.Prefix()+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("%s left %d keys behind: %v", sc.name, len(left), left)
		}
	}
	if v, err := cl.Get(ctx, bystander).Result(); err != nil || v != "keep" {
		t.Errorf("the bystander key was touched: %q, %v", v, err)
	}
}

// A run longer than its marker's TTL keeps its registration: the marker is
// renewed while the run goes on, and not recreated once the run dropped it.
func TestRedisMarkerRenewedWhileTheRunGoes(t *testing.T) {
	p, cl := needRedis(t)
	old := markerRefreshNs.Load()
	markerRefreshNs.Store(int64(20 * time.Millisecond))
	defer markerRefreshNs.Store(old)
	ctx := context.Background()
	type backend interface {
		Prepare(context.Context) error
		Cleanup(context.Context) error
		Close() error
	}
	builds := map[string]func(scenarios.Params) (backend, error){
		"claims": func(p scenarios.Params) (backend, error) { return redisClaimsBackend(ctx, p, storeUp) },
		"leases": func(p scenarios.Params) (backend, error) { return redisLeaseBackend(ctx, p) },
	}
	for name, build := range builds {
		pp := p
		pp.RunID = scenarios.NewRunID()
		b, err := build(pp)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		marker := runs.Marker(pp.RunID)
		// As if the run had lasted all but 2 s of the marker's TTL.
		if err := cl.PExpire(ctx, marker, 2*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		renewed := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if ttl, _ := cl.PTTL(ctx, marker).Result(); ttl > time.Hour {
				renewed = true
				break
			}
		}
		if !renewed {
			t.Errorf("%s: the marker was not renewed (PTTL %s)", name, cl.PTTL(ctx, marker).Val())
		}
		if err := b.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * markerRefresh())
		if n := cl.Exists(ctx, marker).Val(); n != 0 {
			t.Errorf("%s: the marker is back after the cleanup dropped it", name)
			cl.Del(ctx, marker)
		}
		b.Close()
	}
}
