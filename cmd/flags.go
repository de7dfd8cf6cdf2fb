package cmd

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/pflag"
)

// shapeFlags are the flags every command that fires bursts shares: they
// fill a run's shape (runplan.Shape) directly, so the shape's fields are
// written once.
type shapeFlags struct {
	runplan.Shape
	// effects is --effects on run and demo: "" (the scenario's own count)
	// or auto (solo twins); auto sets Shape.SoloEvery.
	effects string
}

// registerAuto registers --effects on the commands that run built-in
// scenarios (run, demo).
func (s *shapeFlags) registerAuto(fs *pflag.FlagSet) {
	fs.StringVar(&s.effects, "effects", "", "auto: judge each burst by what it changed in the store beside a solo twin (the same attempts one at a time, on one replica) instead of the scenario's own count (embedded store)")
}

// auto checks --effects for a run on backend, and sets the shape's solo
// twins for auto.
func (s *shapeFlags) auto(backend string) error {
	switch s.effects {
	case "":
		return nil
	case "auto":
	default:
		return usageErrorf("--effects %q: a built-in scenario counts its own effects; the one choice is auto (judge by solo twins)", s.effects)
	}
	if backend != "memory" {
		return usageErrorf("--effects auto on the built-in scenarios runs on the embedded store (-b memory) for now; on %s, 'racetest sql|redis|mongo … --effects auto' measures your own tables", backend)
	}
	s.SoloEvery = 1
	return nil
}

func (s *shapeFlags) register(fs *pflag.FlagSet, reg *scenarios.Registry, attempts, bursts int) {
	fs.IntVarP(&s.Attempts, "attempts", "n", attempts, "attempts released together in each burst")
	fs.IntVar(&s.Bursts, "bursts", bursts, "bursts to fire, each at a fresh subject")
	fs.IntVar(&s.Replicas, "replicas", runner.DefaultReplicas, "application replicas; attempts are spread round-robin over them")
	fs.IntVar(&s.Waves, "waves", runner.DefaultWaves, "waves of attempts per burst, all at the same subject")
	fs.BoolVar(&s.Deploy, "deploy", false, "restart every replica between waves (a deploy wipes their memory)")
	fs.DurationVar(&s.Timeout, "timeout", runner.DefaultTimeout, "per-attempt timeout; an attempt past it counts as unknown")
	fs.IntVar(&s.Retries, "retry", 0, "SQL backends: retry an attempt the server refused with a deadlock or serialization failure (1213, 1020, 40001, 40P01) up to this many times, as applications do")
	s.registerParams(fs, reg)
}

// registerParams registers the flags that shape the scenario itself (its
// parameters and the servers' addresses): every command that builds a
// scenario shares them, 'racetest serve' included.
func (s *shapeFlags) registerParams(fs *pflag.FlagSet, reg *scenarios.Registry) {
	fs.DurationVar(&s.Gap, "gap", 0, "extra delay between check and write, to widen the window on purpose")
	fs.DurationVar(&s.Latency, "latency", scenarios.DefaultLatency, "memory backend: simulated round trip of each store operation (0 allowed)")
	fs.DurationVar(&s.TTL, "ttl", scenarios.DefaultTTL, "ttl-lease: lease length")
	fs.Int64Var(&s.Seed, "seed", 0, "seed for the run's random choices, such as the memory backend's round-trip jitter (0: a fresh one); recorded in the report")
	fs.StringVar(&s.Isolation, "isolation", "", isolationHelp(reg))
	fs.StringVar(&s.Engine, "engine", "", engineHelp(reg))
	fs.StringVar(&s.Variant, "variant", "", variantHelp(reg))
	fs.StringVar(&s.Fault, "fault", "", "a fault to inject into a cluster scripts/cluster.sh started: failover-after-act (failover-lock's default) or none")
	fs.BoolVar(&s.Keep, "keep", false, "keep the run's namespaced tables, keys and collections for inspection")
	registerConn(fs, reg, &s.Conn)
}

// intFlag and durationFlag are a flag's value with its name: checks take
// them in a list, so that of two bad flags the user always hears of the
// same one first.
type intFlag struct {
	name  string
	value int
}

type durationFlag struct {
	name  string
	value time.Duration
}

// checkAtLeastOne refuses the first flag below 1.
func checkAtLeastOne(flags ...intFlag) error {
	for _, f := range flags {
		if f.value < 1 {
			return usageErrorf("--%s must be at least 1 (got %d)", f.name, f.value)
		}
	}
	return nil
}

// checkDurations refuses the first negative duration.
func checkDurations(flags ...durationFlag) error {
	for _, f := range flags {
		if f.value < 0 {
			return usageErrorf("--%s cannot be negative (got %s)", f.name, f.value)
		}
	}
	return nil
}

// validate checks what no backend could use, and a burst too large for
// this machine's memory on backend; it runs before anything.
func (s *shapeFlags) validate(reg *scenarios.Registry, backend string) error {
	if err := checkAtLeastOne(intFlag{"attempts", s.Attempts}, intFlag{"bursts", s.Bursts}, intFlag{"replicas", s.Replicas}, intFlag{"waves", s.Waves}); err != nil {
		return err
	}
	if err := checkRetry(s.Retries, reg, backend); err != nil {
		return err
	}
	if err := checkBurstMemory(s.Attempts, reg, backend); err != nil {
		return err
	}
	if s.Deploy && s.Waves < 2 {
		return usageErrorf("--deploy restarts replicas between waves: add --waves 2 or more")
	}
	if s.Seed == 0 {
		// A fresh seed, recorded in the report so that it can be given back.
		s.Seed = rand.Int64N(1<<53) + 1
	}
	return checkDurations(durationFlag{"gap", s.Gap}, durationFlag{"latency", s.Latency}, durationFlag{"ttl", s.TTL}, durationFlag{"timeout", s.Timeout})
}

// checkEngine refuses --engine on a backend that has no storage engines
// to choose from: it was accepted and reported as a setting, on postgres
// say, though nothing read it (issue 29).
func (s *shapeFlags) checkEngine(reg *scenarios.Registry, backend string) error {
	if s.Engine == "" {
		return nil
	}
	b, err := reg.Backend(backend)
	if err != nil || len(b.Engines) > 0 {
		return nil // an unknown backend is refused on its own, an engine by the backend
	}
	return usageErrorf("--engine %s: the %s backend has no storage engines to choose from (%s): drop --engine", s.Engine, backend, engineHelp(reg))
}

// params builds a scenario's parameters for one run.
func (s *shapeFlags) params(replicas int) scenarios.Params {
	return s.plan(replicas).Params(scenarios.NewRunID())
}

// plan is the run's shape for runplan, with replicas replicas.
func (s *shapeFlags) plan(replicas int) runplan.Shape {
	sh := s.Shape
	sh.Replicas = replicas
	return sh
}

// checkRetry refuses a retry count that is negative, or given to a backend
// whose attempts never end in a conflict to retry.
func checkRetry(k int, reg *scenarios.Registry, backend string) error {
	if k < 0 {
		return usageErrorf("--retry cannot be negative (got %d)", k)
	}
	if b, err := reg.Backend(backend); k > 0 && (err != nil || !b.Retries()) {
		var sql []string
		for _, b := range reg.Backends() {
			if b.Retries() {
				sql = append(sql, b.Name)
			}
		}
		return usageErrorf("--retry retries deadlocks and serialization failures, which only the SQL backends (%s) report; backend %s has none — drop --retry", strings.Join(sql, ", "), backend)
	}
	return nil
}

// attemptCost is what one attempt of a burst costs racetest's memory, in
// bytes, on backend: the registry's Backend.Cost, or for an HTTP target
// (not a backend of the registry) httpfire's.
func attemptCost(reg *scenarios.Registry, backend string) int64 {
	if backend == httpBackend {
		return httpfire.AttemptCost
	}
	b, _ := reg.Backend(backend)
	return b.Cost()
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
func checkBurstMemory(n int, reg *scenarios.Registry, backend string) error {
	avail, ok := availableMemory()
	where := "available on this machine"
	if !ok {
		avail, where = fallbackMemory, "assumed (the available memory cannot be read here)"
	}
	cost := attemptCost(reg, backend)
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

// allowedUsage is --allowed's help, the same on every command.
const allowedUsage = "effects per burst that are correct: N (exactly N, 0 included), MIN-MAX (0-1: at most once), or successes (each attempt that reported success must have landed exactly once)"

// allowanceOf is the allowance a run's config stands for.
func allowanceOf(c runner.Config) runner.Allowance {
	if c.Accounting {
		return runner.Allowance{Successes: true}
	}
	return runner.Allowance{Min: c.Required, Max: c.Allowed}
}
