package script

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// The examples' scripts, run through the engine on each server: the naive
// redeem must show a race, the conditional one never.

const examples = "../examples/redeem/scripts"

func open(t *testing.T, backend string) (Store, scenarios.Params) {
	t.Helper()
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 8, Replicas: 1, Conn: testenv.Conns("postgres", "mysql", "redis", "mongo")}
	if err, ok := absent.Load(backend); ok {
		testenv.Unavailable(t, backend, err.(error))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := Open(ctx, backend, p)
	if err != nil {
		absent.Store(backend, err)
		testenv.Unavailable(t, backend, err)
	}
	t.Cleanup(func() { st.Close() })
	return st, p
}

// absent holds the servers found unavailable in this test binary, so that
// every later test on one skips at once: the MongoDB driver spends its
// server-selection time-out on each try, paid again by every mutant of a
// mutation run (scripts/mutation.sh script points every server at a closed
// port).
var absent sync.Map // backend name → the error that said so

func exampleSpec(backend, attempt string) Spec {
	switch backend {
	case "redis":
		return Spec{Attempt: []string{"@" + attempt + ".redis"}, Effects: "SCARD redeemed:{{.Token}}", Teardown: "@drop.redis"}
	case "mongo":
		if attempt == "conditional" {
			attempt = "unique"
		}
		return Spec{Setup: "@schema.mongo", Attempt: []string{"@" + attempt + ".mongo"}, Effects: "@count.mongo", Teardown: "@drop.mongo"}
	}
	return Spec{Setup: "@schema.sql", Subject: "@coupon.sql", Attempt: []string{"@" + attempt + ".sql"}, Effects: "@count.sql", Teardown: "@drop.sql"}
}

func runSpec(t *testing.T, backend string, spec Spec, bursts int) (*runner.Result, error) {
	t.Helper()
	st, p := open(t, backend)
	d, _ := DialectOf(backend)
	sc, err := spec.Load(examples, d, func(n string) string { return "--" + n })
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	tg, err := New(st, sc, p.RunID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return runner.Run(ctx, tg, runner.Attempts(8), runner.Bursts(bursts))
}

func TestExamplesOnServers(t *testing.T) {
	for _, backend := range []string{"postgres", "mysql", "redis", "mongo"} {
		t.Run(backend, func(t *testing.T) {
			// Naive: one burst of 8 over the limit suffices; it races in
			// most bursts (98/100 on MariaDB, 76/100 on Redis at N=16), so
			// 40 bursts without one would be a broken example.
			res, err := runSpec(t, backend, exampleSpec(backend, "naive"), 40)
			if err != nil {
				t.Fatalf("naive: %v", err)
			}
			if res.CleanupErr != nil {
				t.Errorf("naive teardown: %v", res.CleanupErr)
			}
			if res.Violations() == 0 {
				t.Errorf("naive redeem: no burst over the limit in %d", len(res.Bursts))
			}
			res, err = runSpec(t, backend, exampleSpec(backend, "conditional"), 20)
			if err != nil {
				t.Fatalf("conditional: %v", err)
			}
			if res.Violations() != 0 {
				t.Errorf("conditional redeem: %d bursts over the limit", res.Violations())
			}
			for _, b := range res.Bursts {
				if b.Effects != 1 || b.Outcomes[runner.Executed] != 1 || b.Outcomes[runner.Declined] != 7 {
					t.Fatalf("conditional redeem, burst %d: %d effects, outcomes %v; want 1 effect, 1 executed and 7 declined", b.Index, b.Effects, b.Outcomes)
				}
			}
		})
	}
}

func TestFirstBurstStopsABrokenScript(t *testing.T) {
	for _, tc := range []struct {
		backend, attempt string
		script           bool
		line             int
	}{
		{"postgres", "SELECT 1;\nINSERT INTO no_such_table_{{.RunID}} VALUES (1);\n", true, 2},
		{"mysql", "SELECT 1;\nINSERT INTO no_such_table_{{.RunID}} VALUES (1);\n", true, 2},
		{"redis", "GET a\nNOSUCHCOMMAND {{.Token}}\n", true, 2},
		{"postgres", "SELECT 1 AS a WHERE false \\gset\n", true, 1},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			effects := "SELECT 0;"
			if tc.backend == "redis" {
				effects = "EXISTS x:{{.Token}}"
			}
			res, err := runSpec(t, tc.backend, Spec{Attempt: []string{tc.attempt}, Effects: effects}, 5)
			var re *RunError
			if !errors.As(err, &re) || re.Script != tc.script {
				t.Fatalf("error %v, want a RunError with Script=%v", err, tc.script)
			}
			var se *StatementError
			var sc *ScriptError
			line := 0
			if errors.As(err, &se) {
				line = se.Pos.Line
			} else if errors.As(err, &sc) {
				line = sc.Pos.Line
			}
			if line != tc.line {
				t.Errorf("error %v names line %d, want %d", err, line, tc.line)
			}
			if len(res.Bursts) != 0 {
				t.Errorf("%d bursts counted after a broken first burst", len(res.Bursts))
			}
		})
	}
}

func TestEffectsMustCount(t *testing.T) {
	_, err := runSpec(t, "postgres", Spec{Attempt: []string{"SELECT 1;"}, Effects: "SELECT 'many';"}, 2)
	var re *RunError
	if !errors.As(err, &re) || !re.Script {
		t.Fatalf("effects returning text: %v, want a script error", err)
	}
}

// An attempt's session on PostgreSQL looks for a deadlock after
// DeadlockTimeout, not the server's deadlock_timeout (1 s by default): a
// deadlock between attempts ended explore's orders and bursts a second
// each. The notes say so.
func TestPostgresSessionsShortenDeadlocks(t *testing.T) {
	st, _ := open(t, "postgres")
	ctx := context.Background()
	pool, err := st.Open(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Exec(ctx, Stmt{Text: "SELECT current_setting('deadlock_timeout') AS t, current_setting('is_superuser') AS su"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Values) != 2 {
		t.Fatalf("reply %+v", r)
	}
	notes := strings.Join(st.Notes(), "\n")
	if r.Values[1] == "on" {
		if r.Values[0] != DeadlockTimeout || !strings.Contains(notes, "deadlock_timeout "+DeadlockTimeout+" on racetest's connections") {
			t.Errorf("deadlock_timeout %s (want %s), notes:\n%s", r.Values[0], DeadlockTimeout, notes)
		}
	} else if !strings.Contains(notes, "may not shorten deadlock_timeout") {
		t.Errorf("not a superuser: notes do not say the deadlock_timeout stays:\n%s", notes)
	}
}
