package sqldb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"
)

// BenchmarkSnapshot measures one --effects auto snapshot of a realistic
// schema: 20 tables of 50,000 rows (10^6 in all), each with an id key and
// three numeric columns, in a schema (database) of the benchmark's own,
// dropped after. Run by hand (docs/measurements.md):
//
//	go test -run '^$' -bench Snapshot -benchtime 20x ./internal/sqldb
func BenchmarkSnapshot(b *testing.B) {
	for _, d := range []Dialect{Postgres, MySQL} {
		b.Run(string(d), func(b *testing.B) {
			ctx := context.Background()
			db := open(b, d, Options{})
			ex := func(q string) {
				if err := db.Exec(ctx, q); err != nil {
					b.Fatalf("%s: %v", q, err)
				}
			}
			r := make([]byte, 4)
			rand.Read(r)
			name := "racetest_" + hex.EncodeToString(r) + "_bench"
			var prev string
			cur := "SELECT current_setting('search_path')"
			if d == MySQL {
				cur = "SELECT DATABASE()"
			}
			if err := db.Admin(ctx, func(ctx context.Context, q Querier) error { return q.QueryRow(ctx, cur).Scan(&prev) }); err != nil {
				b.Fatal(err)
			}
			if d == Postgres {
				ex("CREATE SCHEMA " + name)
				ex("SET search_path TO " + name)
				defer func() { ex("SET search_path TO " + prev); ex("DROP SCHEMA " + name + " CASCADE") }()
			} else {
				ex("CREATE DATABASE " + name)
				ex("USE " + name)
				defer func() { ex("USE " + prev); ex("DROP DATABASE " + name) }()
			}
			built := time.Now()
			ex("CREATE TABLE digits (n INT)")
			ex("INSERT INTO digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)")
			const tables, rows = 20, 50_000
			for i := range tables {
				ex(fmt.Sprintf("CREATE TABLE t%02d (id INT PRIMARY KEY, qty INT NOT NULL, amount DECIMAL(12,2) NOT NULL, score DOUBLE PRECISION NOT NULL, note VARCHAR(40))", i))
				ex(fmt.Sprintf(`INSERT INTO t%02d (id, qty, amount, score, note)
SELECT v, v %% 100, v * 0.25, v * 0.001, 'row'
FROM (SELECT a.n + 10*b.n + 100*c.n + 1000*e.n + 10000*f.n AS v FROM digits a, digits b, digits c, digits e, digits f) x
WHERE v < %d`, i, rows))
			}
			ex("DROP TABLE digits")
			if d == MySQL {
				for i := range tables {
					ex(fmt.Sprintf("ANALYZE TABLE t%02d", i))
				}
			} else {
				ex("ANALYZE")
			}
			b.Logf("%s: built %d tables × %d rows in %s", d, tables, rows, time.Since(built).Round(time.Millisecond))
			var plan *SnapshotPlan
			if err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
				var err error
				plan, err = PlanSnapshot(ctx, d, q, nil)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			if len(plan.Tables) != tables {
				b.Fatalf("planned %d tables", len(plan.Tables))
			}
			b.Logf("%s: %d MiB of table data", d, plan.Bytes>>20)
			b.ResetTimer()
			for b.Loop() {
				if err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
					s, err := ReadSnapshot(ctx, plan, q)
					if err == nil && len(s) != tables*4 {
						err = fmt.Errorf("snapshot of %d keys", len(s))
					}
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
