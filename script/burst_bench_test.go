package script

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/runplan"
	"github.com/racetest/racetest/scenarios"
)

// The cost of a burst (issue 46 item 1; docs/measurements.md, "Stop 52").
//
//	go test -run '^$' -bench PgbenchParity -benchtime 4x ./script/
//	go test -run '^$' -bench BurstCost -benchtime 4x ./script/
//
// Both run racetest's script path as `racetest sql` and `racetest redis`
// do (the default release, auto; the default shape), in process, and log
// each figure with the load average beside it. For experiments,
// BENCH_RELEASE names another release (gate) and BENCH_WRITERS sets the
// last-byte release's writer threads (release.WireOptions.Writers).

// benchN is the attempts of a burst, as the goals are set.
const benchN = 16

// loadavg is the first three fields of /proc/loadavg, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// benchParams are a run's parameters as the command line makes them:
// the servers of the RACETEST_* variables (the defaults when unset), the
// release auto picks for backend.
func benchParams(b *testing.B, backend string) (scenarios.Params, *release.Plan) {
	b.Helper()
	rel, err := release.New(cmp.Or(os.Getenv("BENCH_RELEASE"), string(release.Auto)), backend)
	if err != nil {
		b.Fatal(err)
	}
	if n, _ := strconv.Atoi(os.Getenv("BENCH_WRITERS")); n > 0 && rel.Wire != nil {
		rel.Wire = release.NewWireWith(backend, release.WireOptions{Writers: n})
		rel.Dial = rel.Wire.Dial
	}
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: benchN, Replicas: 1, Dial: rel.Dial,
		Conn: testenv.Conns("postgres", "mysql", "redis", "mongo")}
	return p, rel
}

// runScripts runs attempt (and effects) on backend as `racetest sql` does
// with -n 16 --bursts bursts --allowed 0, from opening racetest's own
// connection to closing it; at is when each burst ended, from the first.
func runScripts(b *testing.B, backend, attempt, effects string, bursts int) (res *runner.Result, at []time.Time) {
	b.Helper()
	p, rel := benchParams(b, backend)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, _ := DialectOf(backend)
	sc, err := Spec{Attempt: []string{attempt}, Effects: effects}.Load("", d, func(n string) string { return "--" + n })
	if err != nil {
		b.Fatal(err)
	}
	st, err := Open(ctx, backend, p)
	if err != nil {
		b.Skipf("%s: %v", backend, err)
	}
	defer st.Close()
	t, err := New(st, sc, p.RunID)
	if err != nil {
		b.Fatal(err)
	}
	sh := runplan.DefaultShape()
	sh.Attempts, sh.Bursts = benchN, bursts
	at = make([]time.Time, 0, bursts)
	opts := append(append(sh.Options(), runner.Allowance{}.Options()...), rel.Options()...)
	opts = append(opts, runner.OnProgress(func(runner.Progress) { at = append(at, time.Now()) }))
	res, err = runner.Run(ctx, t, opts...)
	if err != nil {
		b.Fatal(err)
	}
	if len(res.Bursts) != bursts || res.Violations() != 0 {
		b.Fatalf("%d bursts of %d, %d violations", len(res.Bursts), bursts, res.Violations())
	}
	for _, bu := range res.Bursts {
		if bu.Outcomes[runner.Executed] != benchN {
			b.Fatalf("burst %d: outcomes %v, want %d executed", bu.Index, bu.Outcomes, benchN)
		}
	}
	return res, at
}

// perBurst is the time a burst took once the run was going: from the end
// of the first burst to the end of the last, per burst.
func perBurst(at []time.Time) time.Duration {
	if len(at) < 2 {
		return 0
	}
	return at[len(at)-1].Sub(at[0]) / time.Duration(len(at)-1)
}

// waveTime is the median time of a burst's attempts, from their release
// to the last one's end (runner.Burst.Duration): the rest of a burst is
// its fixed cost (the subject, the effects read before and after).
func waveTime(res *runner.Result) time.Duration {
	d := make([]time.Duration, len(res.Bursts))
	for i, b := range res.Bursts {
		d[i] = b.Duration
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// pgAdmin runs sql on racetest's own connection of a PostgreSQL store.
func pgAdmin(b *testing.B, sql string) {
	b.Helper()
	p, _ := benchParams(b, "postgres")
	p.Dial = nil
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := Open(ctx, "postgres", p)
	if err != nil {
		b.Skipf("postgres: %v", err)
	}
	defer st.Close()
	s, err := Parse("bench", sql, SQL, ScopeRun, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if o := s.Start(st.Admin(), Data{}, nil).Run(ctx, nil); o.Class != runner.Executed {
		b.Fatalf("%s: %v", sql, o.Err)
	}
}

var pgbenchTPS = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)

// pgbench runs script with 16 clients, each its transactions, and returns
// its wall time (the process's: connections included) and its average
// latency (without them).
func pgbench(b *testing.B, bin, script string, transactions int) (wall, latency time.Duration) {
	b.Helper()
	f := filepath.Join(b.TempDir(), "tx.sql")
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-n", "-c", strconv.Itoa(benchN), "-j", "2", "-t", strconv.Itoa(transactions), "-f", f, testenv.URL("postgres"))
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("pgbench: %v\n%s", err, out.String())
	}
	wall = time.Since(start)
	m := pgbenchTPS.FindStringSubmatch(out.String())
	if m == nil {
		b.Fatalf("pgbench printed no latency:\n%s", out.String())
	}
	ms, _ := strconv.ParseFloat(m[1], 64)
	return wall, time.Duration(ms * float64(time.Millisecond))
}

// pgbenchBin finds pgbench on PATH or in PostgreSQL's own directories, or
// says "" when there is none.
func pgbenchBin() string {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(m) > 0 {
		return m[len(m)-1]
	}
	return ""
}

// parityBursts is the bursts (racetest) and transactions per client
// (pgbench) of each run: 16 × 500 attempts, as the issue measured.
const parityBursts = 500

// bareBursts is the least a tool that fires 16 attempts together can do:
// 16 pgx connections, and for each burst every connection waits at one
// barrier (a closed channel), sends the statement, and the burst ends when
// all 16 are back. No release precision (each goroutine writes its whole
// request when the scheduler runs it), no effects read, no bookkeeping. It
// returns the run's wall time, connections included, as pgbench's is.
func bareBursts(b *testing.B, stmt string, bursts int) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	conns := make([]*pgx.Conn, benchN)
	for i := range conns {
		c, err := pgx.Connect(ctx, testenv.URL("postgres"))
		if err != nil {
			b.Skipf("postgres: %v", err)
		}
		defer c.Close(ctx)
		conns[i] = c
	}
	for range bursts {
		gate := make(chan struct{})
		var done sync.WaitGroup
		errs := make([]error, benchN)
		for i, c := range conns {
			done.Go(func() {
				<-gate
				var v int
				errs[i] = c.QueryRow(ctx, stmt).Scan(&v)
			})
		}
		close(gate)
		done.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkPgbenchParity: racetest sql and pgbench on the same
// transaction (a one-row read) of the same table, 16 × 500 attempts each,
// and between them a bare synchronized burst (bareBursts), in turn (the
// order turning each iteration); throughput counts attempts over the whole
// run, connections included. The goal is racetest ≥ 0.7× pgbench;
// bare/pgbench is the most any burst of 16 that waits for its last attempt
// could reach here, and racetest/bare what racetest's own work costs.
func BenchmarkPgbenchParity(b *testing.B) {
	bin := pgbenchBin()
	table := "racetest_parity_" + strings.ReplaceAll(scenarios.NewRunID(), "-", "_")
	pgAdmin(b, "CREATE TABLE "+table+" (id int PRIMARY KEY, v int NOT NULL);\nINSERT INTO "+table+" SELECT g, g FROM generate_series(1, 1000) g;")
	b.Cleanup(func() { pgAdmin(b, "DROP TABLE IF EXISTS "+table) })
	tx := "SELECT v FROM " + table + " WHERE id = 1;\n"
	if bin == "" {
		b.Log("pgbench not found (PATH, /usr/lib/postgresql/*/bin): racetest's side only")
	}
	attempts := float64(benchN * parityBursts)
	var ratios, bareRatios, ceiling []float64
	for i := range b.N {
		var rt, pg, bare float64
		sides := []func(){
			func() {
				load := loadavg()
				wall := bareBursts(b, strings.TrimSuffix(tx, ";\n"), parityBursts)
				bare = attempts / wall.Seconds()
				b.Logf("bare:     %6.0f attempts/s  (%v a run, %v a burst)  load %s", bare, wall.Round(time.Millisecond), (wall / parityBursts).Round(time.Microsecond), load)
			},
			func() {
				load := loadavg()
				start := time.Now()
				res, at := runScripts(b, "postgres", tx, "SELECT 0", parityBursts)
				wall := time.Since(start)
				rt = attempts / wall.Seconds()
				b.Logf("racetest: %6.0f attempts/s  (%v a run, %v a burst once going, its attempts %v)  load %s",
					rt, wall.Round(time.Millisecond), perBurst(at).Round(time.Microsecond), waveTime(res).Round(time.Microsecond), load)
			},
			func() {
				if bin == "" {
					return
				}
				load := loadavg()
				wall, lat := pgbench(b, bin, tx, parityBursts)
				pg = attempts / wall.Seconds()
				b.Logf("pgbench:  %6.0f tx/s        (%v a run, latency %v)  load %s", pg, wall.Round(time.Millisecond), lat.Round(time.Microsecond), load)
			},
		}
		// The three in turn, starting one further each iteration.
		for k := range sides {
			sides[(i+k)%len(sides)]()
		}
		bareRatios = append(bareRatios, rt/bare)
		if pg > 0 {
			ratios = append(ratios, rt/pg)
			ceiling = append(ceiling, bare/pg)
			b.Logf("racetest/pgbench %.2f, racetest/bare %.2f, bare/pgbench %.2f", rt/pg, rt/bare, bare/pg)
		} else {
			b.Logf("racetest/bare %.2f", rt/bare)
		}
	}
	for _, m := range []struct {
		xs   []float64
		unit string
	}{{ratios, "x-pgbench"}, {bareRatios, "x-bare"}, {ceiling, "bare-x-pgbench"}} {
		if len(m.xs) > 0 {
			slices.Sort(m.xs)
			b.ReportMetric(m.xs[len(m.xs)/2], m.unit)
		}
	}
}

// costBursts is the bursts of each run of BenchmarkBurstCost.
const costBursts = 300

// BenchmarkBurstCost: a trivial script at N=16 (`SELECT 1`, Redis's
// `PING`), counted by a trivial effects check, on each server: the time a
// burst takes once the run is going, beside a reference on the same
// server (pgbench's latency, a pipelined go-redis loop of 16 commands a
// round). The goal is ≤ 2 ms a burst. MongoDB has no reference; on this
// machine its server is FerretDB (scripts/ferretdb.sh), which answers each
// command through PostgreSQL, so its figure there is FerretDB's, not
// MongoDB's (docker-compose.yml has a MongoDB 7).
func BenchmarkBurstCost(b *testing.B) {
	for _, c := range []struct{ backend, attempt, effects string }{
		{"postgres", "SELECT 1", "SELECT 0"},
		{"mysql", "SELECT 1", "SELECT 0"},
		{"redis", "PING", "EXISTS racetest:bench:none"},
		{"mongo", `{"ping": 1}`, `{"count": "racetest_bench_none"}`},
	} {
		b.Run(c.backend, func(b *testing.B) {
			var costs []time.Duration
			for i := range b.N {
				ref := func() {
					load := loadavg()
					switch c.backend {
					case "postgres":
						if bin := pgbenchBin(); bin != "" {
							_, lat := pgbench(b, bin, "SELECT 1;\n", costBursts)
							b.Logf("pgbench, 16 clients: %v a round (its latency)  load %s", lat.Round(time.Microsecond), load)
						}
					case "redis":
						b.Logf("go-redis, 16 PINGs pipelined: %v a round  load %s", redisRounds(b, costBursts).Round(time.Microsecond), load)
					}
				}
				own := func() {
					load := loadavg()
					res, at := runScripts(b, c.backend, c.attempt, c.effects, costBursts)
					d := perBurst(at)
					costs = append(costs, d)
					b.Logf("racetest: %v a burst, its attempts %v (median)  load %s", d.Round(time.Microsecond), waveTime(res).Round(time.Microsecond), load)
				}
				if i%2 == 0 {
					own()
					ref()
				} else {
					ref()
					own()
				}
			}
			slices.Sort(costs)
			b.ReportMetric(float64(costs[len(costs)/2].Microseconds())/1000, "ms/burst")
		})
	}
}

// redisRounds is a pipelined go-redis loop's time per round of 16 PINGs.
func redisRounds(b *testing.B, rounds int) time.Duration {
	b.Helper()
	cl := testenv.Redis(b)
	ctx := context.Background()
	start := time.Now()
	for range rounds {
		p := cl.Pipeline()
		for range benchN {
			p.Ping(ctx)
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(rounds)
}

// BenchmarkEffectsRead: one read of a trivial effects check on racetest's
// own connection (inside its read-only transaction), as a burst does
// twice: before it and after.
func BenchmarkEffectsRead(b *testing.B) {
	for _, c := range []struct{ backend, effects string }{
		{"postgres", "SELECT 0"},
		{"mysql", "SELECT 0"},
		{"redis", "EXISTS racetest:bench:none"},
	} {
		b.Run(c.backend, func(b *testing.B) {
			p, _ := benchParams(b, c.backend)
			p.Dial = nil
			ctx := context.Background()
			d, _ := DialectOf(c.backend)
			sc, err := Spec{Attempt: []string{"SELECT 1"}, Effects: c.effects}.Load("", d, func(n string) string { return "--" + n })
			if err != nil {
				b.Fatal(err)
			}
			st, err := Open(ctx, c.backend, p)
			if err != nil {
				b.Skipf("%s: %v", c.backend, err)
			}
			defer st.Close()
			t, err := New(st, sc, p.RunID)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("load %s", loadavg())
			for b.Loop() {
				if n, err := t.Baseline(ctx, runner.Subject{Key: "x"}); err != nil || n != 0 {
					b.Fatalf("%d, %v", n, err)
				}
			}
		})
	}
}
