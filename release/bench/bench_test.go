package bench

import (
	"bytes"
	"context"
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

func TestGoals(t *testing.T) {
	rep := &Report{
		Config: Config{Backends: []string{"redis"}, Attempts: []int{2}, Windows: DefaultWindows},
		Rows: []Row{
			{Backend: "redis", N: 2, Mode: Naive, Bursts: 200, Exposed: 120},
			{Backend: "redis", N: 2, Mode: Gate, Bursts: 200, Exposed: 170},
			{Backend: "redis", N: 2, Mode: LastByte, Bursts: 200, Exposed: 196},
		},
		Resolutions: []Resolution{
			{Backend: "redis", Mode: Gate, Narrowest: 50 * time.Microsecond},
			{Backend: "redis", Mode: LastByte, Narrowest: 10 * time.Microsecond},
		},
	}
	var text []string
	for _, g := range rep.Goals() {
		text = append(text, g.Text)
		switch {
		case strings.Contains(g.Text, "exposed 98.0%"):
			if g.Met || !strings.Contains(g.Text, "short by 1.0 points") {
				t.Errorf("98%% against a 99%% goal: %+v", g)
			}
		case strings.Contains(g.Text, "last-byte 98.0% vs gate 85.0%"), strings.Contains(g.Text, "gate 85.0% vs naive launcher 60.0%"):
			if !g.Met {
				t.Errorf("%+v should be met", g)
			}
		case strings.Contains(g.Text, "resolution"):
			if !g.Met || !strings.Contains(g.Text, "5.0× finer") {
				t.Errorf("10µs against 50µs: %+v", g)
			}
		default:
			t.Errorf("unexpected goal %+v", g)
		}
	}
	if len(text) != 4 {
		t.Errorf("goals %q, want 4", text)
	}
	if g := resolutionGoal("mysql", 50*time.Microsecond, 50*time.Microsecond, DefaultWindows); g.Met {
		t.Errorf("equal resolutions met the 2× goal: %+v", g)
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
	for _, want := range []string{"check-then-write", "resolution at N=2", "goals", "redis: Redis", "mysql: ", "postgres: PostgreSQL"} {
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
