package incidents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
)

// needSQL skips (or fails, under RACETEST_REQUIRE_SERVERS) without the
// server, and returns the params to reach it and a connection of its own.
func needSQL(t *testing.T, d *dialect) (scenarios.Params, *sqlServer) {
	t.Helper()
	p := scenarios.Params{
		RunID: scenarios.NewRunID(), TTL: scenarios.DefaultTTL,
		Conn: testenv.Conns("mysql", "postgres"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := connectSQL(ctx, d, p)
	if err != nil {
		testenv.Unavailable(t, d.name(), err)
	}
	t.Cleanup(func() { s.Close() })
	return p, s
}

func TestConformanceSQL(t *testing.T) {
	for _, d := range []*dialect{mysqlDialect, pgDialect} {
		t.Run(d.name(), func(t *testing.T) {
			p, _ := needSQL(t, d)
			conformance.Run(t, conformance.Suite{Registry: registry(d.name()), Backend: d.name(), Params: p, Bursts: 10})
		})
	}
}

// TestMyISAMIgnoresTheTransaction: the same code on MyISAM keeps the record
// of a failed payment, and the report says which engine it ran on.
func TestMyISAMIgnoresTheTransaction(t *testing.T) {
	p, _ := needSQL(t, mysqlDialect)
	p.Engine = "myisam"
	res, _ := runCase(t, "mysql", RewardPayout, p, shape{variant: OneTransaction})
	everyBurst(t, res, "want 1 payment", func(b runner.Burst) bool { return b.Effects == 1 })
	c := checkOK(t, res, "the transaction is ignored: a failed payment's record stays (MyISAM)")
	if !strings.Contains(c.Detail, "recorded 1, paid 0") {
		t.Errorf("check detail %q does not show the record kept without a payment", c.Detail)
	}
	noteWith(t, res, "MyISAM — it silently ignores transactions")
}

func TestInnoDBRollsBackTheRecord(t *testing.T) {
	p, _ := needSQL(t, mysqlDialect)
	res, _ := runCase(t, "mysql", RewardPayout, p, shape{variant: OneTransaction})
	everyBurst(t, res, "want 1 payment", func(b runner.Burst) bool { return b.Effects == 1 })
	checkOK(t, res, "a failed payment rolls the record back (InnoDB)")
	noteWith(t, res, "InnoDB (transactional)")
}

// TestRewardPayoutSQL asserts each variant's outcome on both SQL servers.
func TestRewardPayoutSQL(t *testing.T) {
	for _, d := range []*dialect{mysqlDialect, pgDialect} {
		t.Run(d.name(), func(t *testing.T) {
			p, _ := needSQL(t, d)
			res, _ := runCase(t, d.name(), RewardPayout, p, shape{variant: CheckThenPay})
			if res.Violations() == 0 {
				t.Errorf("check-then-pay: no burst paid twice in %d", len(res.Bursts))
			}
			res, _ = runCase(t, d.name(), RewardPayout, p, shape{variant: UniqueRecord})
			everyBurst(t, res, "unique: want 1 payment", func(b runner.Burst) bool { return b.Effects == 1 })
			c := checkOK(t, res, "only the duplicate-key error")
			if !strings.Contains(c.Detail, "the attempt was error") {
				t.Errorf("the injected NOT NULL failure was not an error: %s", c.Detail)
			}
			res, _ = runCase(t, d.name(), RewardPayout, p, shape{variant: SwallowErrors})
			everyBurst(t, res, "swallow: want 0 payments, all told already paid", func(b runner.Burst) bool {
				return b.Effects == 0 && b.Outcomes[runner.Declined] == 8
			})
			res, _ = runCase(t, d.name(), RewardPayout, p, shape{variant: External})
			everyBurst(t, res, "external: want 2 payments at the provider", func(b runner.Burst) bool { return b.Effects == 2 })
			noteWith(t, res, "over-pay")
			res, _ = runCase(t, d.name(), RewardPayout, p, shape{variant: ExternalIdempotent})
			everyBurst(t, res, "idempotent: want 1 payment", func(b runner.Burst) bool { return b.Effects == 1 })
		})
	}
}

func TestFencingMustCoverTheCheckSQL(t *testing.T) {
	for _, d := range []*dialect{mysqlDialect, pgDialect} {
		t.Run(d.name(), func(t *testing.T) {
			p, _ := needSQL(t, d)
			lb, err := sqlLeaseBackend(d)(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Close()
			fencingInterleaving(t, lb, p)
		})
	}
}

// TestSQLTouchesOnlyItsTables: a table that already has the run's name is
// neither reused nor dropped, and a run drops every table it made.
func TestSQLTouchesOnlyItsTables(t *testing.T) {
	for _, d := range []*dialect{mysqlDialect, pgDialect} {
		t.Run(d.name(), func(t *testing.T) {
			p, s := needSQL(t, d)
			ctx := context.Background()
			squatter := p.Prefix() + "reward_records"
			if err := s.exec(ctx, "CREATE TABLE "+squatter+" (id INT)"); err != nil {
				t.Fatal(err)
			}
			defer s.exec(ctx, "DROP TABLE IF EXISTS "+squatter)
			target, err := registry(d.name()).Build(ctx, RewardPayout, d.name(), p)
			if err != nil {
				t.Fatal(err)
			}
			defer target.(runner.Closer).Close()
			if _, err := runner.Run(ctx, target, runner.Attempts(2), runner.Bursts(1)); err == nil || !strings.Contains(err.Error(), "already exists and was not made by this run") {
				t.Errorf("run over an existing table: %v, want a refusal naming the table", err)
			}
			if n, err := s.count(ctx, "SELECT COUNT(*) FROM "+squatter); err != nil || n != 0 {
				t.Errorf("the existing table was touched or dropped: count %d, %v", n, err)
			}

			p.RunID = scenarios.NewRunID()
			for _, sc := range []string{RewardPayout, LeasePause} {
				target, err := registry(d.name()).Build(ctx, sc, d.name(), p)
				if err != nil {
					t.Fatal(err)
				}
				res, err := runner.Run(ctx, target, runner.Attempts(2), runner.Bursts(2))
				target.(runner.Closer).Close()
				if err != nil || res.CleanupErr != nil {
					t.Fatalf("%s: %v, cleanup %v", sc, err, res.CleanupErr)
				}
			}
			schema := "DATABASE()"
			if d.name() == "postgres" {
				schema = "current_schema()"
			}
			left, err := s.count(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "+schema+" AND table_name LIKE ?", strings.ReplaceAll(p.Prefix(), "_", `\_`)+"%")
			if err != nil || left != 0 {
				t.Errorf("%d tables of the run left behind (%v)", left, err)
			}
		})
	}
}
