package explore_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/explore"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/script"
)

// burnCPU keeps half the cores busy until the test ends: the load under which
// a timer called slow steps blocked.
func burnCPU(t *testing.T) {
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) })
	for range max(runtime.NumCPU()/2, 1) {
		go func() {
			for x := 0; !stop.Load(); x++ {
				_ = x * x
			}
		}()
	}
}

// fingerprint is what must not change between runs of one exploration:
// the counts, and each order as it ran, with its blocked steps.
func fingerprint(r *explore.Result) string {
	c := r.Count()
	var b strings.Builder
	fmt.Fprintf(&b, "%s explored=%d violating=%d blocked=%d deadlocked=%d conflicts=%d pruned=%d;", r.Verdict(), c.Explored, c.Violating, c.Blocked, c.Deadlocked, c.Conflicts, r.Pruned)
	for _, o := range r.Orders {
		for _, ev := range o.Ran {
			b.WriteString(ev.Label())
			if ev.Blocked {
				b.WriteString("*")
			}
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "=%d;", o.Effects)
	}
	return b.String()
}

// Ten runs of one exploration on PostgreSQL, with half the cores kept busy,
// give the same orders, the same blocked steps and the same counts: a step
// is blocked when the server says it waits on a lock, never because the
// machine was slow, and the --block-after here (1µs) would call every step
// blocked if it were consulted.
func TestTenRunsGiveTheSameCounts(t *testing.T) {
	ctx := context.Background()
	reg := builtin.Registry()
	lostUpdate := func() (runner.Target, error) {
		p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 2, Replicas: 1, Conn: connections(), Isolation: "read-committed"}
		return reg.Build(ctx, "lost-update", "postgres", p)
	}
	dir := "../examples/redeem/scripts/"
	// A script's target, and the reduction 'racetest explore sql' runs
	// on it at that level.
	redeem := func(attempt, level string) func() (runner.Target, explore.Independent, error) {
		return func() (runner.Target, explore.Independent, error) {
			p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 2, Replicas: 1, Conn: connections(), Isolation: level}
			spec := script.Spec{Setup: "@" + dir + "schema.sql", Subject: "@" + dir + "coupon.sql", Attempt: []string{"@" + dir + attempt},
				Effects: "@" + dir + "count.sql", Teardown: "@" + dir + "drop.sql"}
			sc, err := spec.Load("", script.SQL, func(n string) string { return "--" + n })
			if err != nil {
				t.Fatal(err)
			}
			store, err := script.Open(ctx, "postgres", p)
			if err != nil {
				return nil, nil, err
			}
			target, err := script.New(store, sc, p.RunID)
			return target, sqlRules(sc, 2, "postgres", level), err
		}
	}
	catalog := func() (runner.Target, explore.Independent, error) {
		target, err := lostUpdate()
		return target, nil, err
	}
	burnCPU(t)
	for _, c := range []struct {
		name    string
		build   func() (runner.Target, explore.Independent, error)
		blocked bool
		pruned  bool
	}{
		{"lost-update read-committed", catalog, false, false},
		{"conditional redeem", redeem("conditional.sql", ""), true, false},
		// The reduction keeps the counts as stable as the orders it leaves.
		{"naive redeem reduced at read committed", redeem("naive.sql", "read-committed"), true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			first := ""
			for i := range 10 {
				target, indep, err := c.build()
				if err != nil {
					testenv.Unavailable(t, "postgres", err)
				}
				res, err := explore.Run(ctx, target, explore.Options{Attempts: 2, Deadlock: sqldb.IsDeadlock,
					BlockAfter: time.Microsecond, Timeout: 20 * time.Second, Independent: indep})
				if cl, ok := target.(runner.Closer); ok {
					cl.Close()
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Blocking != "server" {
					t.Fatalf("blocked steps judged by the %s, want the server", res.Blocking)
				}
				got := fingerprint(res)
				if i == 0 {
					first = got
					if c.blocked != (res.Count().Blocked > 0) || c.pruned != (res.Pruned > 0) {
						t.Errorf("blocked orders %d, pruned %d: want some blocked %v, some pruned %v", res.Count().Blocked, res.Pruned, c.blocked, c.pruned)
					}
					t.Log(got[:strings.Index(got, ";")])
					continue
				}
				if got != first {
					t.Fatalf("run %d differs from run 1:\n%s\n%s", i+1, got, first)
				}
			}
		})
	}
}
