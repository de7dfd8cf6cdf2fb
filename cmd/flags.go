package cmd

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
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
	Isolation, Engine, Variant, Fault string
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
	fs.StringVar(&s.Fault, "fault", "", "a fault to inject into a cluster scripts/cluster.sh started: failover-after-act (failover-lock's default) or none")
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
	fs.StringVar(&c.RedisReadURL, "redis-read-url", os.Getenv("RACETEST_REDIS_READ_URL"), "a replica of --redis-url, for scenarios that read or promote a replica (env RACETEST_REDIS_READ_URL; scripts/cluster.sh start redis-replica)")
	fs.StringVar(&c.PostgresReadURL, "postgres-read-url", os.Getenv("RACETEST_POSTGRES_READ_URL"), "a streaming replica of --postgres-url, for scenarios whose check reads a replica (env RACETEST_POSTGRES_READ_URL; scripts/cluster.sh start postgres-replica)")
	fs.StringVar(&c.MySQLReadDSN, "mysql-read-dsn", os.Getenv("RACETEST_MYSQL_READ_DSN"), "a replica of --mysql-dsn, for scenarios whose check reads a replica (env RACETEST_MYSQL_READ_DSN; scripts/cluster.sh start mariadb-replica)")
}

// validate checks what no backend could use, and a burst too large for
// this machine's memory on backend; it runs before anything.
func (s *shapeFlags) validate(backend string) error {
	for name, n := range map[string]int{"attempts": s.Attempts, "bursts": s.Bursts, "replicas": s.Replicas, "waves": s.Waves} {
		if n < 1 {
			return usageErrorf("--%s must be at least 1 (got %d)", name, n)
		}
	}
	if err := checkBurstMemory(s.Attempts, backend); err != nil {
		return err
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
		Fault:     s.Fault,
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

// connFlags are the flags that name a server; an explicitly empty value
// is a mistake (an unset variable in a script), never "the default".
var connFlags = []string{"redis-url", "mysql-dsn", "postgres-url", "mongo-uri"}

// checkConnFlags refuses a connection flag given with an empty value.
func checkConnFlags(fs *pflag.FlagSet) error {
	for _, name := range connFlags {
		if f := fs.Lookup(name); f != nil && f.Changed && f.Value.String() == "" {
			return usageErrorf("--%s was given an empty value: name the server (or leave the flag out to use %s or the default)",
				name, connFlagEnv[name])
		}
	}
	return nil
}

var connFlagEnv = map[string]string{
	"redis-url": "RACETEST_REDIS_URL", "mysql-dsn": "RACETEST_MYSQL_DSN",
	"postgres-url": "RACETEST_POSTGRES_URL", "mongo-uri": "RACETEST_MONGO_URI",
}

// attemptCost is what one attempt of a burst costs racetest's memory, in
// bytes: its worker, goroutine and marks (about 5 KiB, measured with
// 'racetest run unique-insert -n 100000 --latency 0': 520 MB), and on a
// server backend its own connection's driver buffers.
func attemptCost(backend string) int64 {
	switch backend {
	case "memory":
		return 6 << 10
	case "http":
		return 48 << 10
	}
	return 64 << 10
}

// availableMemory is the memory a run may use, as the kernel tells it:
// MemAvailable, or less when a cgroup limit is lower. ok is false where
// neither can be read.
var availableMemory = func() (bytes int64, ok bool) {
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, found := strings.CutPrefix(line, "MemAvailable:"); found {
				if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64); err == nil {
					bytes, ok = kb<<10, true
				}
			}
		}
	}
	if max, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		cur, _ := os.ReadFile("/sys/fs/cgroup/memory.current")
		lim, err1 := strconv.ParseInt(strings.TrimSpace(string(max)), 10, 64)
		used, err2 := strconv.ParseInt(strings.TrimSpace(string(cur)), 10, 64)
		if err1 == nil && err2 == nil && (!ok || lim-used < bytes) {
			bytes, ok = max64(lim-used, 0), true
		}
	}
	return bytes, ok
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// fallbackMemory is assumed where the available memory cannot be read.
const fallbackMemory = 4 << 30

// checkBurstMemory refuses a burst of n attempts that cannot fit in half
// the memory available: past it, the run would crash or push the machine
// into swap long before it found anything.
func checkBurstMemory(n int, backend string) error {
	avail, ok := availableMemory()
	where := "available on this machine"
	if !ok {
		avail, where = fallbackMemory, "assumed (the available memory cannot be read here)"
	}
	cost := attemptCost(backend)
	limit := avail / 2 / cost
	if int64(n) <= limit {
		return nil
	}
	return usageErrorf("%d attempts per burst (-n) cannot fit: a burst holds every attempt at once, about %s each on %s, so it needs %s; %s of memory is %s, and a run may use half: use %d attempts or fewer (see Limits in the README)",
		n, formatBytes(cost), backend, formatBytes(int64(n)*cost), formatBytes(avail), where, limit)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	}
	return strconv.FormatInt(n>>10, 10) + " KiB"
}
