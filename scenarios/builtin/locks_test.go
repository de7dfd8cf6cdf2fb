package builtin

import (
	"context"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// TestCheckThenWriteLocks holds check-then-write's locking variants to the
// catalog's table at every isolation level on both SQL servers: FOR SHARE
// and FOR UPDATE lock no absent row in PostgreSQL, InnoDB's gap locks
// deadlock the inserts from repeatable read up, and an advisory lock
// serializes the transactions — except that PostgreSQL's repeatable read
// takes its snapshot before the lock's wait, and races.
func TestCheckThenWriteLocks(t *testing.T) {
	reg := Registry()
	conn := testenv.Conns("mysql", "postgres")
	for _, backend := range []string{"mysql", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			for _, variant := range []string{scenarios.VariantForShare, scenarios.VariantAdvisoryLock} {
				for _, level := range []string{"", "read-committed", "repeatable-read", "serializable"} {
					t.Run(variant+"/"+level, func(t *testing.T) {
						p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 8, Replicas: 1, Variant: variant, Isolation: level, Conn: conn}
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						target, err := reg.Build(ctx, scenarios.CheckThenWrite, backend, p)
						if err != nil {
							testenv.Unavailable(t, backend, err)
						}
						defer func() {
							if c, ok := target.(runner.Closer); ok {
								c.Close()
							}
						}()
						res, err := runner.Run(ctx, target, runner.Attempts(8), runner.Bursts(8))
						if err != nil {
							t.Fatal(err)
						}
						want, why := reg.Expect(scenarios.CheckThenWrite, backend, p, res.Server)
						got := scenarios.ExpectSafe
						if res.Violations() > 0 {
							got = scenarios.ExpectRace
						}
						out := res.Outcomes()
						if got != want || out[runner.Error]+out[runner.Unknown] > 0 {
							t.Fatalf("%s, the catalog expects %s (%s); effects %+v, outcomes %v, errors %v", got, want, why, res.EffectsSummary(), out, res.Errors)
						}
					})
				}
			}
		})
	}
}
