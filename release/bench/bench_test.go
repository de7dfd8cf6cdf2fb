package bench

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/conformance"
)

func TestWindowJudgedOnTheStamps(t *testing.T) {
	b := calBurst{1000, 1004, 1030}
	for _, c := range []struct {
		w    time.Duration
		want int
	}{
		{time.Microsecond, 1}, {4 * time.Microsecond, 1}, {5 * time.Microsecond, 2}, {31 * time.Microsecond, 3},
	} {
		if got := b.executed(c.w); got != c.want {
			t.Errorf("window %s: %d executed, want %d", c.w, got, c.want)
		}
	}
	if b.spread() != 30*time.Microsecond {
		t.Errorf("spread %s, want 30µs", b.spread())
	}
}

func TestInFlight(t *testing.T) {
	at := func(us int) time.Time { return time.Unix(0, int64(us)*1000) }
	// [0,10] and [10,20] touch; [5,15] overlaps both.
	starts := []time.Time{at(0), at(10), at(5)}
	ends := []time.Time{at(10), at(20), at(15)}
	if got := inFlight(starts, ends); got != 2 {
		t.Errorf("inFlight = %d, want 2", got)
	}
}

func TestChecks(t *testing.T) {
	rows := func(naive, def int) []Row {
		return []Row{
			{Backend: "redis", N: 2, Mode: Naive, Bursts: 200, Exposed: naive},
			{Backend: "redis", N: 2, Mode: Gate, Bursts: 200, Exposed: 150},
			{Backend: "redis", N: 2, Mode: LastByte, Bursts: 200, Exposed: def},
		}
	}
	for _, c := range []struct {
		naive, def int
		lost       bool
	}{
		{120, 196, false}, // the default far better
		{190, 190, false}, // equal
		{196, 190, false}, // lower, within the noise
		{196, 150, true},  // clearly lower
		{200, 200, false}, // no variance at all
	} {
		rep := &Report{Config: Config{Backends: []string{"redis"}, Attempts: []int{2}, Windows: DefaultWindows}, Rows: rows(c.naive, c.def)}
		checks := rep.Checks()
		if len(checks) != 1 || checks[0].Lost != c.lost || rep.Failed() != c.lost {
			t.Errorf("default %d/200 vs naive %d/200: checks %+v, want lost=%v", c.def, c.naive, checks, c.lost)
		}
		var out bytes.Buffer
		rep.Print(&out)
		if strings.Contains(out.String(), "NOT MET") || !strings.Contains(out.String(), "default (last-byte)") {
			t.Errorf("the report names no default, or says NOT MET without failing:\n%s", out.String())
		}
		if c.lost != strings.Contains(out.String(), "LOSES") {
			t.Errorf("lost=%v but the report says:\n%s", c.lost, out.String())
		}
	}
	// 95% for the family: with 12 comparisons each is tested at 0.05/12.
	if z := criticalZ(0.05 / 12); z < 2.63 || z > 2.65 {
		t.Errorf("critical z for 12 comparisons = %.3f, want 2.64", z)
	}
	if z := criticalZ(0.05); z < 1.644 || z > 1.646 {
		t.Errorf("critical z at 5%% one-sided = %.3f, want 1.645", z)
	}
}

// The check's false alarms when the default and the naive launcher are
// equally good (the worst case for a false alarm: a better default alarms
// less): simulated --quick runs, 12 comparisons of 40 bursts each, at the
// shares measured here. The family is tested at 5%, with the continuity
// correction; over 10,000 simulated runs (a fixed seed: the figure does not
// move between runs) it alarms in under 1% of them.
func TestCheckFalseAlarmRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(p float64, n int) int {
		k := 0
		for range n {
			if rng.Float64() < p {
				k++
			}
		}
		return k
	}
	const runs, bursts = 10_000, 40
	shares := []float64{0.96, 0.92, 0.9, 0.99, 0.75, 0.5} // as measured at N=2..32
	alarms := 0
	for range runs {
		rep := &Report{Config: Config{Backends: []string{"redis", "mysql", "postgres"}, Attempts: []int{2, 8, 16, 32}}}
		i := 0
		for _, b := range rep.Config.Backends {
			for _, n := range rep.Config.Attempts {
				p := shares[i%len(shares)]
				i++
				rep.Rows = append(rep.Rows,
					Row{Backend: b, N: n, Mode: Naive, Bursts: bursts, Exposed: draw(p, bursts)},
					Row{Backend: b, N: n, Mode: LastByte, Bursts: bursts, Exposed: draw(p, bursts)})
			}
		}
		if rep.Failed() {
			alarms++
		}
	}
	if rate := float64(alarms) / runs; rate >= 0.01 {
		t.Errorf("with equal shares the check alarmed in %d of %d runs (%.2f%%): not under 1 in 100", alarms, runs, 100*rate)
	} else {
		t.Logf("equal shares: %d false alarms in %d simulated runs (%.2f%%)", alarms, runs, 100*rate)
	}
}

// A tiny run against the local servers: every mode of every backend gives a
// row, the counts add up, and the bench drops what it made.
func TestRunSmall(t *testing.T) {
	cfg := Config{
		Attempts: []int{2}, Bursts: 4, Chunk: 2, Registry: builtin.Registry(),
		Conn: scenarios.Connections{
			RedisURL: os.Getenv("RACETEST_REDIS_URL"), MySQLDSN: os.Getenv("RACETEST_MYSQL_DSN"),
			PostgresURL: os.Getenv("RACETEST_POSTGRES_URL"),
		},
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for b, why := range rep.Skipped {
		conformance.Unavailable(t, b, &skipError{err: errString(why)})
	}
	if len(rep.Rows) != 3*3 || len(rep.Resolutions) != 3*3 {
		t.Fatalf("%d rows and %d resolutions, want 9 of each", len(rep.Rows), len(rep.Resolutions))
	}
	for _, r := range rep.Rows {
		if r.Bursts != 4 || r.Errors != 0 || r.Arrival < 0 {
			t.Errorf("%+v: want 4 bursts, no errors and an arrival spread", r)
		}
		if r.Mode == LastByte && r.Wire.Held+r.Wire.Late+r.Wire.Silent != 8 {
			t.Errorf("%+v: last-byte counts do not add up to 8 attempts", r)
		}
	}
	if n := len(rep.Prefixes["mysql"]) + len(rep.Prefixes["postgres"]) + len(rep.Prefixes["redis"]); n != 9 {
		t.Errorf("%d namespaces recorded, want 3 per backend: %v", n, rep.Prefixes)
	}
	if left := leftovers(t, rep); len(left) > 0 {
		t.Errorf("the bench left %q behind", left)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"check-then-write", "resolution at N=2", "check (exits 1", "figures", "redis: Redis", "mysql: ", "postgres: PostgreSQL"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// leftovers lists what the servers still hold under the bench's prefixes.
func leftovers(t *testing.T, rep *Report) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	for backend, prefixes := range rep.Prefixes {
		st, err := openStore(ctx, backend, rep.Config.Conn, "racetest_check_")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range prefixes {
			names, err := list(ctx, st, p)
			if err != nil {
				t.Fatal(err)
			}
			left = append(left, names...)
		}
		st.close()
	}
	return left
}

func list(ctx context.Context, st store, prefix string) ([]string, error) {
	var names []string
	switch s := st.(type) {
	case *redisStore:
		return s.admin.Keys(ctx, prefix+"*").Result()
	case *mysqlStore:
		rows, err := s.admin.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND LEFT(TABLE_NAME, ?) = ?", len(prefix), prefix)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			rows.Scan(&n)
			names = append(names, n)
		}
		return names, rows.Err()
	case *pgStore:
		rows, err := s.admin.Query(ctx, "SELECT tablename FROM pg_tables WHERE left(tablename, $1) = $2", len(prefix), prefix)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			rows.Scan(&n)
			names = append(names, n)
		}
		return names, rows.Err()
	}
	return nil, nil
}
