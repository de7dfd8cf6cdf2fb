package explore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

// agreementCase is one run of the catalog's table: a scenario on a backend
// with its parameters.
type agreementCase struct {
	scenario, backend string
	p                 scenarios.Params
}

func (c agreementCase) String() string {
	var parts []string
	for _, kv := range [][2]string{{"isolation", c.p.Isolation}, {"variant", c.p.Variant}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if c.p.Replicas > 1 {
		parts = append(parts, fmt.Sprintf("replicas=%d", c.p.Replicas))
	}
	return strings.Join(append([]string{c.scenario, c.backend}, parts...), "/")
}

// agreementCases lists, for every scenario in the registry on every backend
// that implements it, the default run and each of the scenario's demo rows
// (their replicas and variant), and on the SQL servers each scenario at
// every isolation level (check-then-write plain and FOR UPDATE): the rows
// of the catalog's expectation table. A scenario added to the registry is covered as it is.
func agreementCases(reg *scenarios.Registry, backend string) []agreementCase {
	var out []agreementCase
	for _, spec := range reg.Scenarios() {
		if _, err := reg.Factory(spec.Name, backend); err != nil {
			continue
		}
		seen := map[string]bool{}
		add := func(p scenarios.Params) {
			c := agreementCase{scenario: spec.Name, backend: backend, p: p}
			if !seen[c.String()] {
				seen[c.String()] = true
				out = append(out, c)
			}
		}
		add(scenarios.Params{Replicas: 1})
		for _, d := range spec.Demo {
			// An exploration is one wave: a deploy between waves is a
			// burst's business.
			if d.Waves > 1 || d.Deploy {
				continue
			}
			add(scenarios.Params{Replicas: max(d.Replicas, 1), Variant: d.Variant})
		}
		// Where the catalog says the isolation level or a variant changes
		// the verdict, every level and each such variant: the anomaly
		// scenarios' expectations are per level, as check-then-write's.
		levels := isolationLevels(reg, spec.Name, backend)
		for _, iso := range levels {
			for _, v := range append([]string{""}, ruleVariants(spec.Name, backend)...) {
				add(scenarios.Params{Replicas: 1, Isolation: iso, Variant: v})
			}
		}
	}
	return out
}

// isolationLevels are the levels to try scenario at on backend: all three
// where the catalog expects different verdicts at different levels, none
// elsewhere.
func isolationLevels(reg *scenarios.Registry, scenario, backend string) []string {
	if backend != "postgres" && backend != "mysql" {
		return nil
	}
	levels := []string{"read-committed", "repeatable-read", "serializable"}
	seen := map[scenarios.Expectation]bool{}
	for _, v := range append([]string{""}, ruleVariants(scenario, backend)...) {
		for _, iso := range levels {
			e, _ := reg.Expect(scenario, backend, scenarios.Params{Replicas: 1, Isolation: iso, Variant: v}, "")
			seen[e] = true
		}
	}
	if len(seen) < 2 {
		return nil
	}
	return levels
}

// ruleVariants are the variants the catalog's table names for scenario on
// backend.
func ruleVariants(scenario, backend string) []string {
	var out []string
	for _, r := range scenarios.Expectations {
		if r.Scenario == scenario && (r.Backend == "" || r.Backend == backend) && r.Variant != "" && !slices.Contains(out, r.Variant) {
			out = append(out, r.Variant)
		}
	}
	return out
}

// serverRule reports whether the catalog's expectation for c comes from a
// row about the server itself (not the pattern).
func serverRule(c agreementCase, server string) bool {
	for _, r := range scenarios.Expectations {
		if r.Match(c.scenario, c.backend, c.p, server) {
			return r.Server != ""
		}
	}
	return false
}

// exploreCase explores one case with two attempts.
func exploreCase(t *testing.T, reg *scenarios.Registry, c agreementCase, blockAfter time.Duration) (*explore.Result, error) {
	t.Helper()
	p := c.p
	p.RunID, p.Attempts, p.Conn = scenarios.NewRunID(), 2, connections()
	p.TTL = 100 * time.Millisecond
	if testing.Short() {
		// lease-pause's first holder sleeps 1.5 TTL in most of its 35
		// orders: 25 of the package's 30 seconds at 100 ms, paid by every
		// mutant of scripts/mutation.sh explore (which runs -short). A
		// shorter lease tells the same verdicts: the pause outlives it
		// whatever the machine's load, and a lease lost earlier than that
		// only adds a race where the catalog already says RACE.
		p.TTL = 25 * time.Millisecond
	}
	spec, err := reg.Scenario(c.scenario)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	target, err := reg.Build(ctx, c.scenario, c.backend, p)
	if err != nil {
		return nil, err
	}
	if cl, ok := target.(runner.Closer); ok {
		defer cl.Close()
	}
	// A generous probe: a step is blocked when it waits on a lock, not
	// because a loaded machine was slow.
	return explore.Run(ctx, target, explore.Options{Attempts: 2, Deadlock: sqldb.IsDeadlock, Replicas: p.Replicas, Allowed: spec.Allowed,
		Required: min(1, spec.Allowed), BlockAfter: blockAfter, Timeout: 20 * time.Second})
}

func connections() scenarios.Connections {
	return scenarios.NewConnections(map[string]string{
		"redis":    testenv.Conn("redis"),
		"mysql":    testenv.Conn("mysql"),
		"postgres": testenv.Conn("postgres"),
		"mongo":    testenv.Conn("mongo"),
		// Replicas, for the scenarios that read or promote one (set by
		// scripts/cluster.sh's CI step; without them those are left out).
		"redis_read":    os.Getenv("RACETEST_REDIS_READ_URL"),
		"postgres_read": os.Getenv("RACETEST_POSTGRES_READ_URL"),
		"mysql_read":    os.Getenv("RACETEST_MYSQL_READ_DSN"),
	})
}

// The statistical mode and the explorer agree on the whole catalog: where
// the catalog expects bursts to race, some order violates; where it
// expects SAFE, no order does — on memory always, and on every server that
// answers (every one, under RACETEST_REQUIRE_SERVERS).
func TestExploreAgreesWithTheCatalog(t *testing.T) {
	reg := builtin.Registry()
	for _, b := range reg.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			if b.Name == "mongo" && !testenv.Set("mongo") {
				// CI's MongoDB stand-in is started by .ci/run, which sets it.
				t.Skip("RACETEST_MONGO_URI is not set: mongo is left out")
			}
			if b.Server {
				t.Parallel()
			}
			cases := agreementCases(reg, b.Name)
			agreed, inside, skipped := 0, 0, 0
			for i, c := range cases {
				res, err := exploreCase(t, reg, c, 250*time.Millisecond)
				var needs *scenarios.ParamError
				if errors.As(err, &needs) && res == nil {
					// A topology this run was not given (a replica): the
					// scenario says what to set; nothing to compare.
					skipped++
					t.Logf("%s: left out: %v", c, err)
					continue
				}
				if err != nil && i == 0 && b.Server && res == nil {
					testenv.Unavailable(t, b.Name, err)
				}
				if err != nil {
					t.Errorf("%s: %v", c, err)
					continue
				}
				want, why := reg.Expect(c.scenario, c.backend, c.p, res.Server)
				got := res.Verdict()
				ok := got == map[scenarios.Expectation]explore.Verdict{
					scenarios.ExpectRace: explore.Race, scenarios.ExpectSafe: explore.Safe, scenarios.ExpectLost: explore.Lost,
				}[want]
				n := res.Count()
				line := fmt.Sprintf("%s: catalog %s, explore %s (%d orders, %d violating, %d blocked, %d deadlocked, %d conflicts)",
					c, want, got, n.Explored, n.Violating, n.Blocked, n.Deadlocked, n.Conflicts)
				if !ok && want != scenarios.ExpectSafe && got == explore.Safe && insideStatement(c, res.Server) {
					// The catalog's outcome needs two statements in flight
					// inside the server at once (a conditional UPDATE that
					// waits on another's row lock, then finds it changed:
					// 40001); one statement at a time cannot show it.
					inside++
					t.Logf("%s — the catalog's outcome here needs two statements in flight at once (%s): below this step granularity", line, why)
					continue
				}
				if !ok && want == scenarios.ExpectRace && got == explore.Safe && serverRule(c, res.Server) {
					// The race is inside one operation of this server
					// (FerretDB's findAndModify): no order of the steps
					// can show it. Said, not hidden.
					inside++
					t.Logf("%s — the catalog's race here is inside one server operation (%s): below this step granularity", line, why)
					continue
				}
				if !ok {
					t.Errorf("%s — %s %s", line, res.Why(), why)
					continue
				}
				agreed++
				t.Log(line)
			}
			t.Logf("%s: %d of %d cases agree; %d race inside one server operation; %d need a topology this run lacks", b.Name, agreed, len(cases), inside, skipped)
		})
	}
}

// interleaved are the orders of two attempts of two steps in which both
// checks come before either write: Hermitage's G2 sessions.
var interleaved = map[string]bool{"A1 B1 A2 B2": true, "A1 B1 B2 A2": true, "B1 A1 A2 B2": true, "B1 A1 B2 A2": true}

// hermitage is the outcome Hermitage's two-session G2 test (predicate
// read, then insert) shows for check-then-write at one isolation level.
type hermitage struct {
	isolation, variant string
	// race: both inserts commit; otherwise one commits and the other is
	// refused, by a deadlock after a lock wait (InnoDB) or by a
	// serialization failure without one (PostgreSQL SSI).
	race, deadlock bool
}

var hermitageG2 = map[string][]hermitage{
	"postgres": {
		{isolation: "read-committed", race: true},
		{isolation: "repeatable-read", race: true},
		{isolation: "repeatable-read", variant: scenarios.VariantForUpdate, race: true},
		{isolation: "serializable"},
	},
	"mysql": {
		{isolation: "read-committed", race: true},
		{isolation: "read-committed", variant: scenarios.VariantForUpdate, race: true},
		{isolation: "repeatable-read", race: true},
		{isolation: "repeatable-read", variant: scenarios.VariantForUpdate, deadlock: true},
		{isolation: "serializable", deadlock: true},
	},
}

// On the SQL servers, exploring check-then-write reproduces Hermitage's G2
// outcomes order by order: the serial orders leave one row; the
// interleaved ones leave two where the level allows G2, and otherwise one,
// the other transaction blocked then deadlocked (InnoDB) or aborted with a
// serialization failure (PostgreSQL).
func TestExploreReproducesHermitageG2(t *testing.T) {
	reg := builtin.Registry()
	for _, backend := range []string{"postgres", "mysql"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			for i, h := range hermitageG2[backend] {
				c := agreementCase{scenario: scenarios.CheckThenWrite, backend: backend,
					p: scenarios.Params{Replicas: 1, Isolation: h.isolation, Variant: h.variant}}
				// Per-order outcomes: a serial order must never look
				// interleaved because a loaded machine was slow.
				res, err := exploreCase(t, reg, c, time.Second)
				if err != nil && i == 0 && res == nil {
					testenv.Unavailable(t, backend, err)
				}
				if err != nil {
					t.Fatalf("%s: %v", c, err)
				}
				if len(res.Orders) != 6 {
					t.Fatalf("%s: %d orders, want C(4,2) = 6", c, len(res.Orders))
				}
				for _, o := range res.Orders {
					what := fmt.Sprintf("%s %s (ran %s): %d effects, attempts %+v", c, o.Planned, o.Schedule, o.Effects, o.Attempts)
					switch {
					case !interleaved[o.Planned]:
						if o.Effects != 1 || o.Deadlocked+o.Conflicts != 0 {
							t.Errorf("%s: a serial order leaves 1 effect and no conflict", what)
						}
					case h.race:
						if o.Effects != 2 || o.Deadlocked+o.Conflicts != 0 {
							t.Errorf("%s: G2 is allowed here, both inserts commit", what)
						}
					case h.deadlock:
						if o.Effects != 1 || o.Deadlocked != 1 || o.Blocked == 0 {
							t.Errorf("%s: want 1 effect, a blocked insert and the other transaction deadlocked (1213)", what)
						}
					default:
						if o.Effects != 1 || o.Conflicts != 1 || o.Deadlocked != 0 {
							t.Errorf("%s: want 1 effect and the other transaction aborted with a serialization failure (40001)", what)
						}
					}
				}
				t.Logf("%s: %s — %+v", c, res.Verdict(), res.Count())
			}
		})
	}
}

// insideStatement reports whether the catalog row that decides c says its
// outcome needs two statements in flight inside the server at once.
func insideStatement(c agreementCase, server string) bool {
	for _, row := range scenarios.Expectations {
		if row.Match(c.scenario, c.backend, c.p, server) {
			return row.InsideStatement
		}
	}
	return false
}
