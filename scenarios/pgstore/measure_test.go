package pgstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// MeasureEnv turns on TestMeasure, which prints figures and asserts none.
const MeasureEnv = "RACETEST_PG_MEASURE"

// TestMeasure prints, for check-then-write with no injected gap, the share
// of bursts that left more than one effect — racetest's release (one
// pre-dialled connection per worker, a gate) beside a naive launcher (a
// goroutine per attempt on a fresh pool with database/sql's defaults, no
// warm-up, no gate) —
// and the median overlap at N=16 and N=64. Run it with
//
//	RACETEST_PG_MEASURE=1 go test -run TestMeasure -v ./scenarios/pgstore/
//
// and RACETEST_PG_MEASURE=500 for 500 bursts per row instead of 200.
func TestMeasure(t *testing.T) {
	v := os.Getenv(MeasureEnv)
	if v == "" {
		t.Skipf("set %s=1 to measure (prints figures, asserts nothing)", MeasureEnv)
	}
	bursts := 200
	if n, err := strconv.Atoi(v); err == nil && n > 1 {
		bursts = n
	}
	p := serverParams(t)
	ctx := context.Background()
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("GOMAXPROCS %d, load average %s", runtime.GOMAXPROCS(0), strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	t.Logf("%-6s %-3s %-7s %-12s %-15s %-15s %s", "launch", "N", "bursts", ">1 effect", "median effects", "median overlap", "median spread")
	// The machine is shared and its load drifts by the minute, so the two
	// launchers take turns in rounds rather than one after the other.
	const rounds = 4
	for _, n := range []int{2, 16, 64} {
		var gate, slow struct {
			over, bursts     int
			effects, overlap []int
			spread           []time.Duration
		}
		for r := range rounds {
			per := bursts/rounds + boolInt(r < bursts%rounds)
			q := p
			q.RunID = scenarios.NewRunID()
			res := run(t, ctx, build(t, scenarios.CheckThenWrite, q), n, per)
			gate.over += res.Violations()
			gate.bursts += len(res.Bursts)
			for _, b := range res.Bursts {
				gate.effects = append(gate.effects, b.Effects)
				gate.overlap = append(gate.overlap, b.Overlap)
				gate.spread = append(gate.spread, b.Spread)
			}
			if n > 16 {
				continue
			}
			q.RunID = scenarios.NewRunID()
			over, effects := naive(t, build(t, scenarios.CheckThenWrite, q), n, per)
			slow.over += over
			slow.bursts += per
			slow.effects = append(slow.effects, effects...)
		}
		t.Logf("%-6s %-3d %-7d %-12s %-15d %-15d %s", "gate", n, gate.bursts, share(gate.over, gate.bursts),
			median(gate.effects), median(gate.overlap), median(gate.spread))
		if slow.bursts > 0 {
			t.Logf("%-6s %-3d %-7d %-12s %-15d %-15s %s", "naive", n, slow.bursts, share(slow.over, slow.bursts),
				median(slow.effects), "-", "-")
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func share(k, n int) string { return fmt.Sprintf("%d (%.0f%%)", k, 100*float64(k)/float64(max(n, 1))) }

func median[T int | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// naive runs check-then-write the way a quick hand-written test would: a
// fresh pool with default settings, a goroutine per attempt, started one
// after another, and the same statements as the scenario with pgx's default
// exec mode. (pgxpool needs puddle, which is not in go.mod; the pool here
// behaves as database/sql's default: open on demand, keep two idle.)
func naive(t *testing.T, tg *target, n, bursts int) (over int, effects []int) {
	t.Helper()
	ctx := context.Background()
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tg.Cleanup(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	pool := &naivePool{}
	defer pool.close()
	for b := range bursts {
		s, err := tg.Reset(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := pool.get(ctx)
				if err != nil {
					return
				}
				defer pool.put(c)
				_ = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
					var id int64
					err := tx.QueryRow(ctx, "SELECT id FROM "+tg.n.effects+" WHERE k = $1 LIMIT 1", s.Key).Scan(&id)
					if !errors.Is(err, pgx.ErrNoRows) {
						return err
					}
					_, err = tx.Exec(ctx, "INSERT INTO "+tg.n.effects+" (k, worker, replica) VALUES ($1, $2, 0)", s.Key, w)
					return err
				})
			}()
		}
		wg.Wait()
		e, err := tg.Effects(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if e > 1 {
			over++
		}
		effects = append(effects, e)
	}
	return over, effects
}

// naivePool is database/sql's default pool in miniature: no limit on open
// connections, dialled on demand, at most two kept idle.
type naivePool struct {
	mu   sync.Mutex
	idle []*pgx.Conn
}

func (p *naivePool) get(ctx context.Context) (*pgx.Conn, error) {
	p.mu.Lock()
	if k := len(p.idle); k > 0 {
		c := p.idle[k-1]
		p.idle = p.idle[:k-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	return pgx.Connect(ctx, testURL())
}

func (p *naivePool) put(c *pgx.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) < 2 && !c.IsClosed() {
		p.idle = append(p.idle, c)
		return
	}
	_ = c.Close(context.Background())
}

func (p *naivePool) close() {
	for _, c := range p.idle {
		_ = c.Close(context.Background())
	}
}

var _ runner.Target = (*target)(nil)
