package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// TestMeasure prints how often check-then-write without a gap shows its race
// at N=2 and N=16, beside a naive launcher, and the median overlap at N=16
// and N=64. It asserts nothing: the figures depend on the machine.
//
//	RACETEST_MYSQL_MEASURE=1 go test -run TestMeasure -v ./scenarios/mysqlstore/
func TestMeasure(t *testing.T) {
	if os.Getenv("RACETEST_MYSQL_MEASURE") == "" {
		t.Skip("set RACETEST_MYSQL_MEASURE=1 to measure (about a minute)")
	}
	p := serverParams(t)
	bursts := 200
	if s := os.Getenv("RACETEST_MYSQL_MEASURE_BURSTS"); s != "" {
		bursts, _ = strconv.Atoi(s)
	}
	var lines []string
	for _, n := range []int{2, 16} {
		q := p
		q.RunID = scenarios.NewRunID()
		naive := measureNaive(t, q, n, bursts, false)
		q.RunID = scenarios.NewRunID()
		naiveDefaults := measureNaive(t, q, n, bursts, true)
		q.RunID = scenarios.NewRunID()
		res := run(t, build(t, scenarios.CheckThenWrite, q), n, bursts)
		lines = append(lines,
			fmt.Sprintf("check-then-write  N=%-3d naive, driver defaults  %3d/%d bursts >1 effect (%5.1f%%)", n, naiveDefaults, bursts, pct(naiveDefaults, bursts)),
			fmt.Sprintf("check-then-write  N=%-3d naive launcher          %3d/%d bursts >1 effect (%5.1f%%)", n, naive, bursts, pct(naive, bursts)),
			fmt.Sprintf("check-then-write  N=%-3d racetest gate           %3d/%d bursts >1 effect (%5.1f%%)  overlap median %d, spread median %s",
				n, res.Violations(), len(res.Bursts), pct(res.Violations(), len(res.Bursts)), res.OverlapSummary().Median, res.SpreadSummary().Median))
	}
	for _, scenario := range []string{scenarios.CheckThenWrite, scenarios.ConditionalUpdate} {
		for _, n := range []int{16, 64} {
			q := p
			q.RunID = scenarios.NewRunID()
			res := run(t, build(t, scenario, q), n, bursts)
			ov := res.OverlapSummary()
			lines = append(lines, fmt.Sprintf("%-18s N=%-3d overlap min/median/max %d/%d/%d (goal >= %.1f), spread median %s",
				scenario, n, ov.Min, ov.Median, ov.Max, 0.9*float64(n), res.SpreadSummary().Median))
		}
	}
	server := build(t, scenarios.CheckThenWrite, p)
	defer server.st.Close()
	t.Logf("%s, %d bursts each, no gap:", server.Server(), bursts)
	for _, l := range lines {
		t.Log(l)
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// measureNaive is how a first attempt at a race test looks: a fresh pool
// with database/sql's defaults, a goroutine per attempt, no warm-up, no
// gate. It sends the same statements as racetest, one round trip each,
// unless driverDefaults is set: then the driver also prepares every
// statement with arguments, a round trip more between check and write.
// It returns the number of bursts that left more than one row.
func measureNaive(t *testing.T, p scenarios.Params, n, bursts int, driverDefaults bool) int {
	t.Helper()
	ctx := context.Background()
	tg := build(t, scenarios.CheckThenWrite, p)
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer tg.Cleanup(ctx)
	cfg, err := Config(p.Conn.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	if driverDefaults {
		cfg.InterpolateParams = false
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	check := "SELECT id FROM `" + tg.table + "` WHERE token = ? LIMIT 1"
	insert := "INSERT INTO `" + tg.table + "` (token, worker) VALUES (?, ?)"
	doubled := 0
	for b := range bursts {
		token := tg.token(b)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return
				}
				defer tx.Rollback()
				var id int64
				if err := tx.QueryRow(check, token).Scan(&id); !errors.Is(err, sql.ErrNoRows) {
					return
				}
				if _, err := tx.Exec(insert, token, i); err == nil {
					tx.Commit()
				}
			}()
		}
		wg.Wait()
		effects, err := tg.Effects(ctx, runner.Subject{Key: token})
		if err != nil {
			t.Fatal(err)
		}
		if effects > 1 {
			doubled++
		}
	}
	return doubled
}
