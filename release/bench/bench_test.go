package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
	"github.com/racetest/racetest/scenarios/runs"
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
	rep := &Report{Config: Config{Backends: []string{"redis", "mysql", "postgres"}, Attempts: []int{2, 8, 16, 32}}}
	for _, b := range rep.Config.Backends {
		for _, n := range rep.Config.Attempts {
			rep.Rows = append(rep.Rows, Row{Backend: b, N: n, Mode: Naive, Bursts: 40, Exposed: 30}, Row{Backend: b, N: n, Mode: LastByte, Bursts: 40, Exposed: 30})
		}
	}
	if cs := rep.Checks(); len(cs) != 12 || math.Abs(cs[0].Alpha-0.05/12) > 1e-15 {
		t.Errorf("%d checks at level %v each, want 12 at 0.05/12", len(cs), cs[0].Alpha)
	}
}

// The default is checked against every hand-written launcher, the naive one
// and each user-style one, and loses to whichever beats it; the release
// modes are not launchers.
func TestChecksEveryLauncher(t *testing.T) {
	rep := &Report{Config: Config{Backends: []string{"postgres"}, Attempts: []int{2}}, Rows: []Row{
		{Backend: "postgres", N: 2, Mode: Naive, Bursts: 200, Exposed: 150, Idiom: NaiveIdiom},
		{Backend: "postgres", N: 2, Mode: Gate, Bursts: 200, Exposed: 199},
		{Backend: "postgres", N: 2, Mode: LastByte, Bursts: 200, Exposed: 160},
		{Backend: "postgres", N: 2, Mode: UserPgx, Bursts: 200, Exposed: 196, Idiom: idiomOf("postgres", UserPgx)},
		{Backend: "postgres", N: 2, Mode: UserSQL, Bursts: 200, Exposed: 158, Idiom: idiomOf("postgres", UserSQL)},
	}}
	checks := rep.Checks()
	var against []string
	for _, c := range checks {
		against = append(against, c.Naive.Mode)
		if c.Lost != (c.Naive.Mode == UserPgx) {
			t.Errorf("%s: lost=%v, want a loss to user-pgx only", c.Text, c.Lost)
		}
	}
	if strings.Join(against, ",") != "naive,user-pgx,user-sql" {
		t.Errorf("checked against %v, want naive, user-pgx and user-sql, in the table's order", against)
	}
	if !rep.Failed() || math.Abs(checks[0].Alpha-0.05/3) > 1e-15 {
		t.Errorf("failed=%v at level %v, want a failure with each of 3 comparisons at 0.05/3", rep.Failed(), checks[0].Alpha)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"LOSES  postgres N=2: default (last-byte) 80.0% vs user-pgx 98.0%",
		"postgres user-pgx: pgx.Conn per goroutine", "postgres user-sql: database/sql over pgx's stdlib", "postgres naive: a goroutine"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "postgres gate:") {
		t.Errorf("the report lists the gate among the launchers:\n%s", out.String())
	}
}

// Every backend's user-style launchers have a name the check knows and an
// idiom to print, and --modes can name each.
func TestLaunchersNamed(t *testing.T) {
	for _, b := range Backends {
		if len(LaunchersOf(b)) == 0 {
			t.Errorf("%s has no user-style launcher", b)
		}
		for _, l := range LaunchersOf(b) {
			if !IsLauncher(l.Name) || l.Idiom == "" || idiomOf(b, l.Name) != l.Idiom || !slices.Contains(AllModes(), l.Name) {
				t.Errorf("%s %+v: not a launcher to the check, without an idiom, or unknown to --modes", b, l)
			}
		}
	}
	for _, m := range Modes() {
		if IsLauncher(m) != (m == Naive) {
			t.Errorf("IsLauncher(%q) = %v", m, IsLauncher(m))
		}
	}
}

// criticalZ is the z beyond which a one-sided test rejects at level alpha.
func criticalZ(alpha float64) float64 { return math.Sqrt2 * math.Erfinv(1-2*alpha) }

// quickRow simulates one --quick row: 40 bursts in chunks of 5, each chunk's
// bursts exposing with the share chunkShare gives it.
func quickRow(rng *rand.Rand, b string, n int, mode string, chunkShare func() float64) Row {
	const bursts, chunk = 40, 5
	r := Row{Backend: b, N: n, Mode: mode, Bursts: bursts}
	for range bursts / chunk {
		p, k := chunkShare(), 0
		for range chunk {
			if rng.Float64() < p {
				k++
			}
		}
		r.Exposed += k
		r.Chunks = append(r.Chunks, k)
		r.ChunkBursts = append(r.ChunkBursts, chunk)
	}
	return r
}

// quickRuns simulates runs --quick runs of 12 comparisons whose default and
// naive rows draw their chunks' shares from def and naive (given the row's
// nominal share), and returns how many alarmed; binomial counts instead how
// many would have alarmed under the plain binomial z (no dispersion).
func quickRuns(seed uint64, runs int, def, naive func(rng *rand.Rand, p float64) float64) (alarms, binomial int) {
	rng := rand.New(rand.NewPCG(seed, 2))
	shares := []float64{0.96, 0.92, 0.9, 0.99, 0.75, 0.5} // as measured at N=2..32
	for range runs {
		rep := &Report{Config: Config{Backends: []string{"redis", "mysql", "postgres"}, Attempts: []int{2, 8, 16, 32}}}
		i := 0
		for _, b := range rep.Config.Backends {
			for _, n := range rep.Config.Attempts {
				p := shares[i%len(shares)]
				i++
				rep.Rows = append(rep.Rows,
					quickRow(rng, b, n, Naive, func() float64 { return naive(rng, p) }),
					quickRow(rng, b, n, LastByte, func() float64 { return def(rng, p) }))
			}
		}
		checks := rep.Checks()
		for _, c := range checks {
			if c.Lost {
				alarms++
				break
			}
		}
		for _, c := range checks {
			if twoProportionZ(c.Default.Exposed, c.Default.Bursts, c.Naive.Exposed, c.Naive.Bursts) < -criticalZ(c.Alpha) {
				binomial++
				break
			}
		}
	}
	return alarms, binomial
}

func steady(_ *rand.Rand, p float64) float64 { return p }

// underLoad is a chunk's share on a loaded machine: one chunk in eight is
// hit by a burst of load that halves its share, whatever the mode — as
// bench --quick saw at load 11-23, where a chunk of PostgreSQL at N=2 fell
// to 1 or 2 of 5 in either mode.
func underLoad(rng *rand.Rand, p float64) float64 {
	if rng.Float64() < 1.0/8 {
		return p / 2
	}
	return p
}

// The check's false alarms when the default and the naive launcher are
// equally good (the worst case for a false alarm: a better default alarms
// less), in simulated --quick runs: 12 comparisons of 40 bursts in chunks of
// 5, at the shares measured here, with a fixed seed (the figures do not move
// between runs). Quiet (every chunk at the row's share) and under load (a
// chunk in eight at half its share, in either mode alike) the permutation
// test alarms in about 1.1% of single runs: under the family's nominal 5%,
// and the same with or without load. CI believes a loss only when a second
// run, started after the first lost, loses too: with runs this independent,
// about 1 in 8,000. The plain two-proportion z, which takes bursts for
// independent draws, alarms in 9% of single runs under load (measured on the
// servers: 3 of 42 --quick runs at load 11-23): the case the permutation
// test is there for.
func TestCheckFalseAlarmRate(t *testing.T) {
	const runs = 4_000
	for _, c := range []struct {
		name       string
		share      func(*rand.Rand, float64) float64
		binomialOK bool // whether the plain binomial z stays under 2 in 100 too
	}{
		{"quiet", steady, true},
		{"under load", underLoad, false},
	} {
		alarms, binomial := quickRuns(1, runs, c.share, c.share)
		rate, brate := float64(alarms)/runs, float64(binomial)/runs
		t.Logf("%s, equal shares: %d false alarms in %d simulated runs (%.2f%%; CI's two runs: %.3f%%); the binomial z alone: %d (%.2f%%)",
			c.name, alarms, runs, 100*rate, 100*rate*rate, binomial, 100*brate)
		if rate >= 0.02 {
			t.Errorf("%s: with equal shares the check alarmed in %d of %d runs (%.2f%%): not under 2 in 100 (CI's two runs: under 1 in 2,500)", c.name, alarms, runs, 100*rate)
		}
		if !c.binomialOK && brate < 0.05 {
			t.Errorf("%s: the binomial z alone alarmed in only %.2f%% of runs: the simulated load does not disperse the chunks, and this case tests nothing", c.name, 100*brate)
		}
	}
}

// The check still sees a default that really loses: exposing half the
// bursts where the naive launcher exposes 95%, in one comparison of four,
// is caught in at least 95 single runs in 100 on a quiet machine, and 70
// under load (78% simulated): load costs the test power, not honesty.
func TestCheckPower(t *testing.T) {
	const runs = 2_000
	for _, c := range []struct {
		name  string
		share func(*rand.Rand, float64) float64
		floor float64
	}{
		{"quiet", steady, 0.95},
		{"under load", underLoad, 0.70},
	} {
		rng := rand.New(rand.NewPCG(7, 3))
		caught := 0
		for range runs {
			rep := &Report{Config: Config{Backends: []string{"postgres"}, Attempts: []int{2, 8, 16, 32}}}
			for _, n := range rep.Config.Attempts {
				def := 0.95
				if n == 2 {
					def = 0.5
				}
				rep.Rows = append(rep.Rows,
					quickRow(rng, "postgres", n, Naive, func() float64 { return c.share(rng, 0.95) }),
					quickRow(rng, "postgres", n, LastByte, func() float64 { return c.share(rng, def) }))
			}
			if rep.Failed() {
				caught++
			}
		}
		rate := float64(caught) / runs
		t.Logf("%s: a default at 50%% against naive's 95%% caught in %d of %d runs (%.1f%%)", c.name, caught, runs, 100*rate)
		if rate < c.floor {
			t.Errorf("%s: a default at 50%% against naive's 95%% was caught in only %.1f%% of runs, want %.0f%%", c.name, 100*rate, 100*c.floor)
		}
	}
}

// The permutation test's p-value is the share of deals of the chunks that
// leave a group at most as exposed as the default: counted exactly on small
// cases, and the same from one call to the next on large ones.
func TestPermutationP(t *testing.T) {
	row := func(chunks ...int) Row {
		r := Row{}
		for _, k := range chunks {
			r.Chunks = append(r.Chunks, k)
			r.ChunkBursts = append(r.ChunkBursts, 5)
			r.Exposed += k
			r.Bursts += 5
		}
		return r
	}
	// Chunks 0,0 against 5,5: of the C(4,2) = 6 deals only {0,0} is as low.
	if p := permutationP(row(0, 0), row(5, 5)); math.Abs(p-1.0/6) > 1e-12 {
		t.Errorf("0,0 against 5,5: p = %v, want 1/6", p)
	}
	// Equal chunks: every deal is as low (ties count): p = 1.
	if p := permutationP(row(4, 4), row(4, 4)); p != 1 {
		t.Errorf("4,4 against 4,4: p = %v, want 1", p)
	}
	// The default higher: the only deal as low as 5,5 is every deal with a
	// share of at most 1, all 6.
	if p := permutationP(row(5, 5), row(0, 0)); p != 1 {
		t.Errorf("5,5 against 0,0: p = %v, want 1", p)
	}
	// Chunks 1,2,3 against 4,5,5: the deals whose sum ≤ 6, of C(6,3) = 20:
	// {1,2,3}=6 only.
	if p := permutationP(row(1, 2, 3), row(4, 5, 5)); math.Abs(p-1.0/20) > 1e-12 {
		t.Errorf("1,2,3 against 4,5,5: p = %v, want 1/20", p)
	}
	if p := permutationP(Row{Bursts: 40, Exposed: 20}, row(5, 5)); p != -1 {
		t.Errorf("a row without chunks: p = %v, want -1 (judged by z)", p)
	}
	// Past maxDeals (C(40,20) deals) the sample has a fixed seed.
	var a, b []int
	for i := range 20 {
		a, b = append(a, i%3+2), append(b, 4+i%2)
	}
	p1, p2 := permutationP(row(a...), row(b...)), permutationP(row(a...), row(b...))
	if p1 != p2 || p1 <= 0 || p1 > 0.01 {
		t.Errorf("20 chunks of 2-4 against 20 of 4-5: p = %v then %v, want one small figure", p1, p2)
	}
	// In a check, a default that loses chunk after chunk is caught; one
	// bad chunk among good ones is not.
	check := func(def Row) Check {
		rep := &Report{Config: Config{Backends: []string{"postgres"}, Attempts: []int{2}}, Rows: []Row{
			func() Row { r := row(5, 5, 4, 5, 5, 5, 5, 4); r.Backend, r.N, r.Mode = "postgres", 2, Naive; return r }(),
			func() Row { def.Backend, def.N, def.Mode = "postgres", 2, LastByte; return def }(),
		}}
		return rep.Checks()[0]
	}
	if c := check(row(2, 3, 2, 3, 2, 3, 2, 3)); !c.Lost || !strings.Contains(c.Text, "p = ") {
		t.Errorf("every chunk lower: %+v, want lost, with its p", c)
	}
	if c := check(row(5, 5, 5, 0, 5, 5, 5, 5)); c.Lost {
		t.Errorf("one chunk at 0 of 5, the rest at 5: %+v, want not lost (one chunk is a burst of load, not a mode)", c)
	}
}

// A tiny run against the local servers: every mode of every backend gives a
// row, the counts add up, and the bench drops what it made.
func TestRunSmall(t *testing.T) {
	cfg := Config{
		Backends: Backends, Attempts: []int{2}, Bursts: 4, Chunk: 2, Registry: builtin.Registry(),
		Conn: testenv.Conns("redis", "mysql", "postgres"),
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for b, why := range rep.Skipped {
		testenv.Unavailable(t, b, &skipError{err: errString(why)})
	}
	modes := 0
	for _, b := range Backends {
		modes += len(Modes()) + len(LaunchersOf(b))
	}
	if len(rep.Rows) != modes || len(rep.Resolutions) != modes {
		t.Fatalf("%d rows and %d resolutions, want %d of each", len(rep.Rows), len(rep.Resolutions), modes)
	}
	for _, r := range rep.Rows {
		if r.Bursts != 4 || r.Errors != 0 || r.Arrival < 0 {
			t.Errorf("%+v: want 4 bursts, no errors and an arrival spread", r)
		}
		if IsLauncher(r.Mode) != (r.Idiom != "") {
			t.Errorf("%s %s: idiom %q", r.Backend, r.Mode, r.Idiom)
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
	for _, want := range []string{"check-then-write", "resolution at N=2", "check (exits 1", "figures", "redis: Redis", "mysql: ", "postgres: PostgreSQL",
		"vs user-pgx", "vs user-sql", "vs user-redis", "redis user-redis: one go-redis client"} {
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
		st, err := openStore(ctx, backend, rep.Config.Conn, scenarios.NewRunID())
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

// The bench's own store registers its run as a scenario's target does, so
// that 'racetest clean' can drop what a bench killed outright left: while
// the store is prepared the run is registered and owns its table or keys;
// after its cleanup neither the registration nor an object is left.
func TestBenchRunIsRegistered(t *testing.T) {
	ctx := context.Background()
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) {
			id := scenarios.NewRunID()
			st := preparedStore(t, b, id, "registered")
			if n, err := st.effects(ctx, "registered"); err != nil || n != 1 {
				t.Fatalf("effects: %d (%v), want 1", n, err)
			}
			if rs, ok := st.(*redisStore); ok {
				if ttl := rs.admin.PTTL(ctx, rs.ctwKey("registered")).Val(); ttl <= 0 || ttl > runs.KeyTTL {
					t.Errorf("the burst's key lives %v once counted, want up to %v, as every key a run writes", ttl, runs.KeyTTL)
				}
			}
			l := leftoverOf(t, st, id)
			if l == nil || !l.Registered || len(l.Objects) == 0 || !strings.HasPrefix(l.Objects[0], benchPrefix(id)) {
				t.Errorf("while the bench runs: %+v, want run %s registered with its objects", l, id)
			}
			if err := st.cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if l := leftoverOf(t, st, id); l != nil {
				t.Errorf("after its cleanup: %+v, want nothing of run %s", l, id)
			}
		})
	}
}

// A bench whose id another run registered first does not start, and its
// cleanup leaves that run's registration and objects alone.
func TestBenchLeavesAnotherRunsID(t *testing.T) {
	ctx := context.Background()
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) {
			id := scenarios.NewRunID()
			// The other run: registered, with its table or key.
			other := preparedStore(t, b, id, "other")
			defer other.cleanup(ctx)
			before := leftoverOf(t, other, id)

			st, err := openStore(ctx, b, serverConns(), id)
			if err != nil {
				t.Fatal(err)
			}
			defer st.close()
			var inUse *runs.InUseError
			if err := st.prepare(ctx); !errors.As(err, &inUse) {
				t.Fatalf("prepare with an id in use: %v, want it refused", err)
			}
			if err := st.cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			after := leftoverOf(t, other, id)
			if before == nil || after == nil || !after.Registered || !slices.Equal(after.Objects, before.Objects) {
				t.Errorf("the other run before: %+v, after the refused bench's cleanup: %+v, want it untouched", before, after)
			}
		})
	}
}

// serverConns are the local servers, as the other tests find them.
func serverConns() scenarios.Connections {
	return testenv.Conns("redis", "mysql", "postgres")
}

// preparedStore is the bench's store for run id on backend b, prepared,
// with token written once by b's first user-style launcher; it is closed
// when the test ends, and the caller cleans it up. It skips the test when
// the server does not answer.
func preparedStore(t *testing.T, b, id, token string) store {
	t.Helper()
	ctx := context.Background()
	st, err := openStore(ctx, b, serverConns(), id)
	if err != nil {
		testenv.Unavailable(t, b, err)
	}
	t.Cleanup(st.close)
	if err := st.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	u, err := st.user(ctx, LaunchersOf(b)[0].Name, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	if err := u.checkThenWrite(ctx, token, 0); err != nil {
		t.Fatal(err)
	}
	return st
}

// leftoverOf is what 'racetest clean' would list of run id on st's server.
func leftoverOf(t *testing.T, st store, id string) *runs.Leftover {
	t.Helper()
	ctx := context.Background()
	var left []runs.Leftover
	var err error
	switch s := st.(type) {
	case *redisStore:
		left, err = runs.LeftoversRedis(ctx, s.admin)
	case *mysqlStore:
		left, err = runs.LeftoversSQL(ctx, runs.MySQL, runs.Std(s.admin))
	case *pgStore:
		left, err = runs.LeftoversSQL(ctx, runs.Postgres, runs.Pgx(s.admin))
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range left {
		if left[i].RunID == id {
			return &left[i]
		}
	}
	return nil
}

// Each user-style launcher runs the scenario's check and write on the
// servers: one after the other on one token, the second attempt sees the
// first's write; fired together, the burst leaves one or two writes; its
// calibration attempt reads the server's clock.
func TestUserLaunchers(t *testing.T) {
	ctx := context.Background()
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) {
			st, err := openStore(ctx, b, serverConns(), scenarios.NewRunID())
			if err != nil {
				testenv.Unavailable(t, b, err)
				return
			}
			defer st.close()
			if err := st.prepare(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := st.cleanup(ctx); err != nil {
					t.Error(err)
				}
			}()
			for _, l := range LaunchersOf(b) {
				u, err := st.user(ctx, l.Name, 2)
				if err != nil {
					t.Fatalf("%s: %v", l.Name, err)
				}
				serial := l.Name + "-serial"
				for w := range 2 {
					if err := u.checkThenWrite(ctx, serial, w); err != nil {
						t.Errorf("%s, worker %d: %v", l.Name, w, err)
					}
				}
				if n, err := st.effects(ctx, serial); err != nil || n != 1 {
					t.Errorf("%s one after the other: %d writes (%v), want 1: the second attempt did not see the first's", l.Name, n, err)
				}
				together := l.Name + "-burst"
				_, overlap, errs := userBurst(ctx, 2, func(ctx context.Context, w int) error { return u.checkThenWrite(ctx, together, w) })
				if n, err := st.effects(ctx, together); err != nil || n < 1 || n > 2 || errs != 0 || overlap < 1 {
					t.Errorf("%s together: %d writes (%v), %d errors, overlap %d: want 1 or 2 writes, no error", l.Name, n, err, errs, overlap)
				}
				at, err := u.arrive(ctx, 1)
				if d := time.Since(time.UnixMicro(at)); err != nil || d < -time.Minute || d > time.Minute {
					t.Errorf("%s: the server's clock read %v (%v), %s from ours", l.Name, time.UnixMicro(at), err, d)
				}
				u.close()
			}
		})
	}
}

// Two rows at 0% whose attempts all failed (a server down, every request
// refused) measured nothing: the check does not pass them, it fails saying
// so. A 0% row without errors is a measurement, and is judged.
func TestChecksRefuseRowsThatMeasuredNothing(t *testing.T) {
	for _, c := range []struct {
		defErrs, naiveErrs int
		unjudged           bool
	}{{400, 400, true}, {400, 0, true}, {0, 400, true}, {0, 0, false},
		// Half the attempts failed: nothing measured; one stray error: measured.
		{200, 0, true}, {199, 0, false}, {0, 1, false}} {
		rep := &Report{Config: Config{Backends: []string{"redis"}, Attempts: []int{2}}, Rows: []Row{
			{Backend: "redis", N: 2, Mode: Naive, Bursts: 200, Errors: c.naiveErrs},
			{Backend: "redis", N: 2, Mode: LastByte, Bursts: 200, Errors: c.defErrs},
		}}
		checks := rep.Checks()
		if len(checks) != 1 || checks[0].Unjudged != c.unjudged || rep.Failed() != c.unjudged {
			t.Errorf("errors %d (default) and %d (naive), both at 0%%: %+v, failed %v; want unjudged and failed: %v",
				c.defErrs, c.naiveErrs, checks, rep.Failed(), c.unjudged)
		}
		var out bytes.Buffer
		rep.Print(&out)
		if strings.Contains(out.String(), "NOT JUDGED") != c.unjudged {
			t.Errorf("errors %d and %d: the report says\n%s", c.defErrs, c.naiveErrs, out.String())
		}
	}
}

// The resolution line, a reference figure, says which of last-byte and the
// gate resolves the finer window in words a reader cannot misread,
// including when a mode exposed no window at all (a negative resolution),
// and never calls it a target met.
func TestResolutionFigureComparesTheTwo(t *testing.T) {
	ws := []time.Duration{2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond}
	for _, c := range []struct {
		lb, gate time.Duration
		want     string
	}{
		{5 * time.Microsecond, 10 * time.Microsecond, "— last-byte finer (2.0×)"},
		{5 * time.Microsecond, 5 * time.Microsecond, "— the same"},
		{10 * time.Microsecond, 5 * time.Microsecond, "— last-byte coarser (2.0×)"},
		{0, 5 * time.Microsecond, "— last-byte exposes even the narrowest window measured"},
		{-1, 5 * time.Microsecond, "last-byte none up to 10.0µs, gate 5.0µs — last-byte coarser"},
		{5 * time.Microsecond, -1, "gate none up to 10.0µs — last-byte finer"},
		{-1, -1, "last-byte none up to 10.0µs, gate none up to 10.0µs"},
	} {
		got := resolutionFigure("redis", c.lb, c.gate, ws)
		if !strings.HasSuffix(got, c.want) {
			t.Errorf("last-byte %v, gate %v: %q, want it to end %q", c.lb, c.gate, got, c.want)
		}
	}
}

// A mode whose calibration judged no burst (every one had a failed
// attempt) has no resolution: the figure says "not measured", never "finer"
// against a gate that measured nothing.
func TestResolutionOfNothingIsNotMeasured(t *testing.T) {
	ws := []time.Duration{5 * time.Microsecond, 10 * time.Microsecond}
	rep := &Report{Config: Config{Backends: []string{"redis"}, Windows: ws}, Resolutions: []Resolution{
		{Backend: "redis", Mode: LastByte, Exposed: []int{150, 200}, Bursts: []int{200, 200}, Narrowest: 5 * time.Microsecond},
		{Backend: "redis", Mode: Gate, Exposed: []int{0, 0}, Bursts: []int{0, 0}, Narrowest: -1},
	}}
	figs := strings.Join(rep.Figures(), "\n")
	if !strings.Contains(figs, "redis resolution: not measured (last-byte judged 200 bursts, the gate 0)") || strings.Contains(figs, "finer") || strings.Contains(figs, "coarser") {
		t.Errorf("figures:\n%s\nwant the resolution not measured", figs)
	}
	rep.Resolutions[1] = Resolution{Backend: "redis", Mode: Gate, Exposed: []int{20, 200}, Bursts: []int{200, 200}, Narrowest: 10 * time.Microsecond}
	if figs := strings.Join(rep.Figures(), "\n"); !strings.Contains(figs, "— last-byte finer (2.0×)") {
		t.Errorf("figures:\n%s\nwant last-byte finer (2.0×)", figs)
	}
}

// Within a round, each mode follows every other mode equally often over a
// full period of rounds: a mode that leaves the machine busy (a fresh
// connection per request) weighs on each of the others alike, not on the
// one that always came after it in a rotated order.
func TestTurnOrderIsBalanced(t *testing.T) {
	for k := 1; k <= 8; k++ {
		period := k
		if k%2 == 1 {
			period = 2 * k
		}
		after := map[[2]int]int{}
		for r := range period {
			order := turnOrder(k, r)
			if s := slices.Sorted(slices.Values(order)); !slices.Equal(s, seq(k)) {
				t.Fatalf("k=%d round %d: %v is not an order of the %d modes", k, r, order, k)
			}
			for j := 1; j < k; j++ {
				after[[2]int{order[j-1], order[j]}]++
			}
		}
		for a := range k {
			for b := range k {
				if a == b {
					continue
				}
				if got, want := after[[2]int{a, b}], period/k; got != want {
					t.Errorf("k=%d: mode %d came right after mode %d in %d rounds of %d, want %d (every pair alike)", k, b, a, got, period, want)
				}
			}
		}
	}
}

func seq(k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = i
	}
	return out
}

// pickRuns simulates runs bench runs of the pick family over HTTP: auto
// against single-packet, its pick, at every target and N of the form
// (the full one: four targets, 200 bursts in chunks of 20; --quick's:
// three, 40 in chunks of 5), auto's chunks drawn from auto's share and
// single-packet's from pick's, and returns how many failed.
func pickRuns(seed uint64, runs int, quick bool, auto, pick func(rng *rand.Rand, p float64) float64, lowAt int) int {
	rng := rand.New(rand.NewPCG(seed, 5))
	bursts, chunk, backends := DefaultBursts, DefaultChunk, HTTPBackends
	if quick {
		bursts, chunk, backends = 40, 5, []string{HTTPSpin, HTTPRedis, HTTPPostgres}
	}
	shares := []float64{0.97, 0.8, 0.95, 0.9, 0.99} // as measured over HTTP at N=2..64
	row := func(b string, n int, mode string, p float64, share func(*rand.Rand, float64) float64) Row {
		r := Row{Backend: b, N: n, Mode: mode, Bursts: bursts}
		for range bursts / chunk {
			q, k := share(rng, p), 0
			for range chunk {
				if rng.Float64() < q {
					k++
				}
			}
			r.Exposed += k
			r.Chunks = append(r.Chunks, k)
			r.ChunkBursts = append(r.ChunkBursts, chunk)
		}
		return r
	}
	failed := 0
	for range runs {
		rep := &Report{Config: Config{Backends: backends}}
		i := 0
		for _, b := range backends {
			ns, _ := sqlHTTPAttempts(DefaultHTTPAttempts)
			if !IsSQLHTTP(b) {
				ns = DefaultHTTPAttempts
			}
			for _, n := range ns {
				p := shares[i%len(shares)]
				a := row(b, n, Auto, p, auto)
				if i == lowAt {
					a = row(b, n, Auto, p-0.1, steady)
				}
				i++
				a.Chose = SinglePacket
				rep.Rows = append(rep.Rows, a, row(b, n, SinglePacket, p, pick))
			}
		}
		if rep.PickFailed() {
			failed++
		}
	}
	return failed
}

// The pick check's false alarms, when auto and its pick are one release
// (as they are now): simulated bench runs in both forms,
// quiet and under load (a chunk in eight at half its share, in either mode
// alike), fixed seeds. Each must stay under 1 in 100: the family's level
// is 1% (Bonferroni), the permutation test's p is exact for chunks that
// are exchangeable, so the union bound holds whatever the number of
// comparisons; the simulation shows the discreteness does not break it
// under load either.
func TestPickCheckFalseAlarmRate(t *testing.T) {
	for _, quick := range []bool{false, true} {
		runs := 1_000
		if quick {
			runs = 5_000
		}
		for _, c := range []struct {
			name  string
			share func(*rand.Rand, float64) float64
		}{{"quiet", steady}, {"under load", underLoad}} {
			failed := pickRuns(11, runs, quick, c.share, c.share, -1)
			rate := float64(failed) / float64(runs)
			t.Logf("quick=%v %s, auto equal to its pick: %d failed runs in %d (%.2f%%)", quick, c.name, failed, runs, 100*rate)
			if rate >= PickLevel {
				t.Errorf("quick=%v %s: with auto equal to its pick the check failed %d runs of %d (%.2f%%): not under 1 in 100", quick, c.name, failed, runs, 100*rate)
			}
		}
	}
}

// And it sees an auto that is not its pick, if not always: 10 points below
// it at one N of ten (85% against 95%, 200 bursts each) fails the full
// bench in about a third of quiet runs (35% simulated; an 8-point gap, 84.5%
// against 92.5%, at p ≈ 0.01 alone, would mostly pass). The family's 1%
// level buys its false alarms with power; more bursts buy it back
// (--bursts 1000 on the cell in doubt).
func TestPickCheckPower(t *testing.T) {
	const runs = 1_000
	failed := pickRuns(13, runs, false, steady, steady, 2) // index 2: share 0.95
	rate := float64(failed) / runs
	t.Logf("auto 10 points below its pick at one N of ten: the full bench failed in %d of %d runs (%.1f%%)", failed, runs, 100*rate)
	if rate < 0.3 {
		t.Errorf("auto 10 points below its pick failed only %.1f%% of runs, want at least 30%%", 100*rate)
	}
}
