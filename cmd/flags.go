package cmd

import (
	"math/rand/v2"
	"os"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mongostore"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/pgstore"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/spf13/pflag"
)

// shapeFlags are the flags every command that fires bursts shares.
type shapeFlags struct {
	Attempts, Bursts, Replicas, Waves int
	Deploy                            bool
	Gap, Latency, TTL, Timeout        time.Duration
	Seed                              int64
	Isolation, Engine, Variant        string
	Keep                              bool
	Conn                              scenarios.Connections
}

func (s *shapeFlags) register(fs *pflag.FlagSet, attempts, bursts int) {
	fs.IntVarP(&s.Attempts, "attempts", "n", attempts, "attempts released together in each burst")
	fs.IntVar(&s.Bursts, "bursts", bursts, "bursts to fire, each at a fresh subject")
	fs.IntVar(&s.Replicas, "replicas", runner.DefaultReplicas, "application replicas; attempts are spread round-robin over them")
	fs.IntVar(&s.Waves, "waves", runner.DefaultWaves, "waves of attempts per burst, all at the same subject")
	fs.BoolVar(&s.Deploy, "deploy", false, "restart every replica between waves (a deploy wipes their memory)")
	fs.DurationVar(&s.Timeout, "timeout", runner.DefaultTimeout, "per-attempt timeout; an attempt past it counts as unknown")
	s.registerParams(fs)
}

// registerParams registers the flags that shape the scenario itself (its
// parameters and the servers' addresses): every command that builds a
// scenario shares them, 'racetest serve' included.
func (s *shapeFlags) registerParams(fs *pflag.FlagSet) {
	fs.DurationVar(&s.Gap, "gap", 0, "extra delay between check and write, to widen the window on purpose")
	fs.DurationVar(&s.Latency, "latency", scenarios.DefaultLatency, "memory backend: simulated round trip of each store operation (0 allowed)")
	fs.DurationVar(&s.TTL, "ttl", scenarios.DefaultTTL, "ttl-lease: lease length")
	fs.Int64Var(&s.Seed, "seed", 0, "seed for the run's random choices, such as the memory backend's round-trip jitter (0: a fresh one); recorded in the report")
	fs.StringVar(&s.Isolation, "isolation", "", "SQL backends: read-uncommitted, read-committed, repeatable-read or serializable (default: the server's)")
	fs.StringVar(&s.Engine, "engine", "", "mysql backend: storage engine, innodb (default) or myisam")
	fs.StringVar(&s.Variant, "variant", "", "scenario variant: for-update (check-then-write on SQL), one-active (unique-insert as one active row per user)")
	fs.BoolVar(&s.Keep, "keep", false, "keep the run's namespaced tables, keys and collections for inspection")
	registerConn(fs, &s.Conn)
}

// registerConn registers the servers' addresses, defaulting to the
// RACETEST_* environment variables.
func registerConn(fs *pflag.FlagSet, c *scenarios.Connections) {
	fs.StringVar(&c.RedisURL, "redis-url", os.Getenv("RACETEST_REDIS_URL"), "Redis URL (env RACETEST_REDIS_URL; default "+redisstore.DefaultURL+")")
	fs.StringVar(&c.MySQLDSN, "mysql-dsn", os.Getenv("RACETEST_MYSQL_DSN"), "MySQL/MariaDB DSN or mysql:// URL (env RACETEST_MYSQL_DSN; default "+mysqlstore.DefaultDSN+")")
	fs.StringVar(&c.PostgresURL, "postgres-url", os.Getenv("RACETEST_POSTGRES_URL"), "PostgreSQL URL (env RACETEST_POSTGRES_URL; default "+pgstore.DefaultURL+")")
	fs.StringVar(&c.MongoURI, "mongo-uri", os.Getenv("RACETEST_MONGO_URI"), "MongoDB URI (env RACETEST_MONGO_URI; default "+mongostore.DefaultURI+")")
}

// validate checks what no backend could use; it runs before anything.
func (s *shapeFlags) validate() error {
	for name, n := range map[string]int{"attempts": s.Attempts, "bursts": s.Bursts, "replicas": s.Replicas, "waves": s.Waves} {
		if n < 1 {
			return usageErrorf("--%s must be at least 1 (got %d)", name, n)
		}
	}
	if s.Deploy && s.Waves < 2 {
		return usageErrorf("--deploy restarts replicas between waves: add --waves 2 or more")
	}
	if s.Seed == 0 {
		// A fresh seed, recorded in the report so that it can be given back.
		s.Seed = rand.Int64N(1<<53) + 1
	}
	return checkDurations(map[string]time.Duration{"gap": s.Gap, "latency": s.Latency, "ttl": s.TTL, "timeout": s.Timeout})
}

// params builds a scenario's parameters for one run.
func (s *shapeFlags) params(replicas int) scenarios.Params {
	return scenarios.Params{
		RunID:     scenarios.NewRunID(),
		Attempts:  s.Attempts,
		Replicas:  replicas,
		Gap:       s.Gap,
		Latency:   s.Latency,
		TTL:       s.TTL,
		Seed:      s.Seed,
		Isolation: s.Isolation,
		Engine:    s.Engine,
		Variant:   s.Variant,
		Conn:      s.Conn,
	}
}

// config builds the runner's shape for one run.
func (s *shapeFlags) config(spec scenarios.Spec, replicas, waves int, deploy bool) runner.Config {
	return runner.NewConfig(
		runner.Attempts(s.Attempts), runner.Bursts(s.Bursts), runner.Replicas(replicas),
		runner.Waves(waves), runner.Deploy(deploy), runner.Allowed(spec.Allowed),
		runner.Timeout(s.Timeout), runner.Keep(s.Keep),
	)
}
