package sqlsnap_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/sqldialect"
	"github.com/racetest/racetest/internal/sqlsnap"
	"github.com/racetest/racetest/runner"
)

// BenchmarkSnapshotRows measures one --effects auto snapshot of one table
// of 1k, 10k, 100k and 1M rows (an INT key, three numeric columns, a short
// text), on PostgreSQL and MariaDB, and reports it per 1,000 rows
// (ms/1k-rows) beside the load average (/proc/loadavg, 1 min). The table,
// racetest_bench_…, is the benchmark's own, in the connection's schema,
// dropped after; the plan watches it by name.
//
// Two cases a burst has: "changed", a row updated (outside the timer)
// before each snapshot, as after a burst's attempts; "unchanged", nothing
// written by the benchmark between snapshots, as the snapshot before a
// burst that follows the one after its solo twin (other sessions' writes
// on a shared server still count as changes). Run by hand
// (docs/measurements.md, Stop 52):
//
//	go test -run '^$' -bench SnapshotRows -benchtime 5x ./internal/sqlsnap/
func BenchmarkSnapshotRows(b *testing.B) {
	sizes := []int{1_000, 10_000, 100_000, 1_000_000}
	if s := os.Getenv("BENCH_ROWS"); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			var n int
			fmt.Sscan(f, &n)
			sizes = append(sizes, n)
		}
	}
	for _, d := range []sqldb.Dialect{sqldb.Postgres, sqldb.MySQL} {
		b.Run(string(d), func(b *testing.B) {
			ctx := context.Background()
			db, err := sqldb.Open(ctx, d, "", sqldb.Options{})
			if err != nil {
				if os.Getenv("RACETEST_REQUIRE_SERVERS") != "" {
					b.Fatal(err)
				}
				b.Skipf("%s unavailable: %v", d, err)
			}
			defer db.Close()
			for _, rows := range sizes {
				b.Run(label(rows), func(b *testing.B) {
					table := benchTable(b, db, rows)
					for _, mode := range []string{"changed", "unchanged"} {
						b.Run(mode, func(b *testing.B) { benchRead(b, db, table, rows, mode == "changed") })
					}
				})
			}
		})
	}
}

func label(rows int) string {
	if rows >= 1_000_000 {
		return fmt.Sprintf("%dM", rows/1_000_000)
	}
	return fmt.Sprintf("%dk", rows/1_000)
}

// benchTable creates racetest_bench_<random> with rows rows, dropped when
// b ends.
func benchTable(b *testing.B, db *sqldb.DB, rows int) string {
	ctx := context.Background()
	r := make([]byte, 4)
	rand.Read(r)
	table := "racetest_bench_" + hex.EncodeToString(r)
	ex := func(q string) {
		if err := db.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	built := time.Now()
	ex("CREATE TABLE " + table + " (id INT PRIMARY KEY, qty INT NOT NULL, amount DECIMAL(12,2) NOT NULL, score DOUBLE PRECISION NOT NULL, note VARCHAR(40))")
	b.Cleanup(func() {
		// On a connection of its own: a statement past AdminTimeout
		// closes the run's.
		own, err := sqldb.Open(ctx, db.Dialect(), "", sqldb.Options{})
		if err == nil {
			err = own.Exec(ctx, "DROP TABLE "+table)
			own.Close()
		}
		if err != nil {
			b.Errorf("DROP TABLE %s: %v", table, err)
		}
	})
	// 100,000 rows a statement at most (each within AdminTimeout on a
	// loaded machine): base + v, v over 0..10^k-1, one digit table per
	// power of ten.
	digits := "(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	var sum, from []string
	for k, p := 0, 1; p < min(rows, 100_000); k, p = k+1, p*10 {
		sum = append(sum, fmt.Sprintf("%d*d%d.n", p, k))
		from = append(from, fmt.Sprintf("%s d%d", digits, k))
	}
	for base := 0; base < rows; base += 100_000 {
		ex(fmt.Sprintf(`INSERT INTO %s (id, qty, amount, score, note)
SELECT v, v %% 100, v * 0.25, v * 0.001, 'row'
FROM (SELECT %d + %s AS v FROM %s) x
WHERE v < %d`, table, base, strings.Join(sum, " + "), strings.Join(from, ", "), rows))
	}
	ex("ANALYZE " + sqldialect.Pick(db.Dialect(), "TABLE ", "") + table)
	b.Logf("%s: %d rows built in %s", table, rows, time.Since(built).Round(time.Millisecond))
	return table
}

// benchRead reads one snapshot of table per iteration; changed updates a
// row before each, outside the timer.
func benchRead(b *testing.B, db *sqldb.DB, table string, rows int, changed bool) {
	ctx := context.Background()
	var plan *sqlsnap.SnapshotPlan
	if err := db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
		var err error
		plan, err = sqldb.PlanSnapshot(ctx, db.Dialect(), q, []string{table})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	read := func() {
		if err := db.Admin(ctx, func(ctx context.Context, q sqldb.Querier) error {
			s, err := sqldb.ReadSnapshot(ctx, plan, q)
			if err == nil && s[table+runner.RowsSuffix].RatString() != fmt.Sprint(rows) {
				err = fmt.Errorf("%s rows: %s, want %d", table, s[table+runner.RowsSuffix].RatString(), rows)
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	read() // the first read of a plan is always a full one
	load := loadavg()
	var spent time.Duration
	for b.Loop() {
		if changed {
			b.StopTimer()
			if err := db.Exec(ctx, "UPDATE "+table+" SET qty = qty + 1 WHERE id = 1"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		start := time.Now()
		read()
		spent += time.Since(start)
	}
	b.ReportMetric(float64(spent.Microseconds())/1000/float64(b.N)/(float64(rows)/1000), "ms/1k-rows")
	b.ReportMetric(load, "load1")
	if r, ok := any(plan).(interface{ Reused() int }); ok {
		b.ReportMetric(float64(r.Reused())/float64(b.N+1), "reused/op")
	}
}

// loadavg is the 1-minute load average, or -1.
func loadavg() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	fmt.Sscan(string(raw), &l)
	return l
}
