package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// redisURL is the local Redis the tests use, as the other tests find it.
func redisURL() string { return testenv.Conn("redis") }

// testClient is the tests' client of a served target: no request waits
// longer than 10 s.
var testClient = &http.Client{Timeout: 10 * time.Second}

// fireAt posts to the target served at url on key and returns the
// response's status.
func fireAt(t *testing.T, url, key string) int {
	t.Helper()
	resp, err := testClient.Post(url+"/?key="+key, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// countAt reads the target's own count of key's writes, through GET
// /count as the effects check does.
func countAt(t *testing.T, url, key string) int {
	t.Helper()
	resp, err := testClient.Get(url + "/count?key=" + key)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /count: %s %q", resp.Status, b)
	}
	return n
}

// countTarget fires at a served target: k requests one after the other on
// one key, then k together on another (all inside the window), and reads
// back the target's counts through GET /count, as the effects check does.
func countTarget(t *testing.T, act actor, k int) {
	t.Helper()
	srv, err := startHTTPServer(newHTTPTarget(act))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	post := func(key string) int { return fireAt(t, srv.URL, key) }
	count := func(key string) int { return countAt(t, srv.URL, key) }
	serial := "serial-" + scenarios.NewRunID()
	var statuses []int
	for range k {
		statuses = append(statuses, post(serial))
	}
	if want := append([]int{200}, slices.Repeat([]int{409}, k-1)...); !slices.Equal(statuses, want) {
		t.Errorf("one after the other: statuses %v, want %v", statuses, want)
	}
	if n := count(serial); n != 1 {
		t.Errorf("one after the other: counted %d writes, want 1", n)
	}
	if n := count("never-" + scenarios.NewRunID()); n != 0 {
		t.Errorf("a key nobody wrote: counted %d writes, want 0", n)
	}
	// Together: every check lands before the first write (the window is far
	// wider than the burst), so every request writes, and each is counted.
	together := "together-" + scenarios.NewRunID()
	start := make(chan struct{})
	var wg sync.WaitGroup
	codes := make([]int, k)
	for i := range k {
		wg.Go(func() { <-start; codes[i] = post(together) })
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == 200 {
			ok++
		}
	}
	if n := count(together); n != ok || ok < 2 {
		t.Errorf("together: counted %d writes for %d answers 200 (%v), want them equal and at least 2", n, ok, codes)
	}
}

// The spin target counts every write, and only writes: one after the other
// a key is written once; released together inside its window, each request
// writes, and the count says so.
func TestSpinTargetCounts(t *testing.T) {
	countTarget(t, newSpinActor(200*time.Millisecond), 4)
	// Its window is a wait between check and write: a short one, one
	// request at a time, still writes once.
	a := newSpinActor(DefaultHTTPWindow)
	for range 3 {
		a.checkThenWrite(context.Background(), "k")
	}
	if n, _ := a.writes(context.Background(), "k"); n != 1 {
		t.Errorf("three checks one after the other: %d writes, want 1", n)
	}
}

// The Redis-backed target counts the list's length, and deletes its keys,
// and only its keys, at the end.
func TestRedisTargetCounts(t *testing.T) {
	ctx := context.Background()
	prefix := "racetest_" + scenarios.NewRunID() + "_bench_http_"
	a, err := newRedisActor(ctx, redisURL(), prefix)
	if err != nil {
		testenv.Unavailable(t, "redis", err)
		return
	}
	defer a.close()
	// Its keys are a registered run's, for 'racetest clean'.
	id, _ := runs.RunOf(prefix)
	if n, _ := a.rdb.Exists(ctx, runs.Marker(id)).Result(); n != 1 {
		t.Errorf("run %s is not registered (no %s)", id, runs.Marker(id))
	}
	// Its window is a Redis round trip: slow it so the burst lands inside.
	slow := slowActor{a, 200 * time.Millisecond}
	countTarget(t, slow, 4)
	keys, _ := a.rdb.Keys(ctx, prefix+"*").Result()
	if len(keys) == 0 {
		t.Fatal("the target wrote no key")
	}
	for _, k := range keys {
		if ttl, _ := a.rdb.TTL(ctx, k).Result(); ttl <= 0 || ttl > runs.KeyTTL {
			t.Errorf("key %s lives %v, want at most a day (runs.KeyTTL): a killed bench must leave nothing for good", k, ttl)
		}
	}
	other := "racetest_" + scenarios.NewRunID() + "_other"
	a.rdb.Set(ctx, other, "x", time.Minute)
	defer a.rdb.Del(ctx, other)
	if err := a.cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := a.rdb.Keys(ctx, runs.Prefix(id)+"*").Result(); len(left) > 0 {
		t.Errorf("cleanup left %v (the keys or the registration)", left)
	}
	if n, _ := a.rdb.Exists(ctx, other).Result(); n != 1 {
		t.Errorf("cleanup deleted a key outside its prefix")
	}
}

// The Redis-backed target's keys must be a run's: a prefix that names none
// is refused before anything is written.
func TestRedisTargetNeedsARunPrefix(t *testing.T) {
	for _, p := range []string{"p_", "racetest_", "bench_racetest_1a2b3c4d_"} {
		if _, err := newRedisActor(context.Background(), "redis://127.0.0.1:9", p); err == nil || !strings.Contains(err.Error(), "need a run's prefix") {
			t.Errorf("prefix %q: %v, want it refused", p, err)
		}
	}
}

// slowActor widens a target's window: a pause between its check and its
// write, where the real target has a round trip.
type slowActor struct {
	*redisActor
	pause time.Duration
}

func (s slowActor) checkThenWrite(ctx context.Context, key string) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.prefix+key).Result()
	if err != nil || n > 0 {
		return false, err
	}
	time.Sleep(s.pause)
	return true, s.write(ctx, key)
}

// httpRows are rows for every HTTP mode at every N over both targets, the
// default at def bursts exposed of 200 and every rival at rival.
func httpRows(def, rival int) *Report {
	rep := &Report{Config: Config{Backends: HTTPBackends}}
	for _, b := range HTTPBackends {
		for _, n := range DefaultHTTPAttempts {
			for _, m := range HTTPModes() {
				k := rival
				if m == Auto {
					k = def
				}
				rep.Rows = append(rep.Rows, Row{Backend: b, N: n, Mode: m, Bursts: 200, Exposed: k})
			}
		}
	}
	return rep
}

// Over HTTP the default (auto) is held to every other release mode and to
// the user's launcher, at every N, on both targets: none is left out.
func TestHTTPChecksCoverEveryMode(t *testing.T) {
	rep := httpRows(150, 150)
	got := map[string]bool{}
	for _, c := range rep.Checks() {
		if c.Default.Mode != Auto || c.Naive.Mode == Auto {
			t.Errorf("%s: the default is %s, the rival %s", c.Text, c.Default.Mode, c.Naive.Mode)
		}
		got[fmt.Sprintf("%s %d %s", c.Backend, c.N, c.Naive.Mode)] = true
	}
	for _, b := range HTTPBackends {
		for _, n := range DefaultHTTPAttempts {
			for _, m := range HTTPModes() {
				if m != Auto && !got[fmt.Sprintf("%s %d %s", b, n, m)] {
					t.Errorf("no check of auto against %s at %s N=%d", m, b, n)
				}
			}
		}
	}
	if want := len(HTTPBackends) * len(DefaultHTTPAttempts) * (len(HTTPModes()) - 1); len(got) != want {
		t.Errorf("%d checks, want %d", len(got), want)
	}
	for _, m := range []string{Barrier, LastByte, SinglePacket, Naive, UserHTTP} {
		if !slices.Contains(HTTPModes(), m) || !slices.Contains(AllModes(), m) {
			t.Errorf("the HTTP modes %v (or --modes's %v) leave out %s", HTTPModes(), AllModes(), m)
		}
	}
	// A default far below every rival loses; far above, it does not.
	if !httpRows(100, 190).Failed() || httpRows(190, 100).Failed() {
		t.Errorf("auto at 50%% against rivals at 95%% must fail the bench, and not the other way round")
	}
	// On the servers the gate is a release mode, not a rival: only the
	// launchers are (unchanged by HTTP).
	srv := &Report{Config: Config{Backends: []string{"redis"}}, Rows: []Row{
		{Backend: "redis", N: 2, Mode: LastByte, Bursts: 200, Exposed: 100},
		{Backend: "redis", N: 2, Mode: Gate, Bursts: 200, Exposed: 190},
	}}
	if len(srv.Checks()) != 0 {
		t.Errorf("the gate is checked on redis: %+v", srv.Checks())
	}
}

// A tiny HTTP bench: every mode gives a row of its bursts on each target,
// auto picks single-packet over h2c and says so, the user's launcher names
// its idiom, and the Redis target leaves nothing behind.
func TestRunHTTPSmall(t *testing.T) {
	cfg := Config{Backends: []string{HTTPSpin, HTTPRedis}, HTTPAttempts: []int{2, 3}, Bursts: 4, Chunk: 2,
		Conn: scenarios.NewConnections(map[string]string{"redis": redisURL()})}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	backends := []string{HTTPSpin, HTTPRedis}
	if why, ok := rep.Skipped[HTTPRedis]; ok {
		if testenv.Required() {
			t.Fatalf("http-redis skipped: %s", why)
		}
		t.Logf("http-redis skipped (no Redis): %s", why)
		backends = []string{HTTPSpin}
	}
	if want := len(backends) * 2 * len(HTTPModes()); len(rep.Rows) != want {
		t.Fatalf("%d rows, want %d", len(rep.Rows), want)
	}
	for _, r := range rep.Rows {
		if r.Bursts != 4 || r.Errors != 0 || r.Arrival < 0 || len(r.Chunks) != 2 {
			t.Errorf("%+v: want 4 bursts in 2 chunks, no errors, an arrival spread", r)
		}
		if (r.Mode == UserHTTP) != (r.Idiom != "") {
			t.Errorf("%s %s: idiom %q", r.Backend, r.Mode, r.Idiom)
		}
	}
	// Single-packet, the mode auto picks, is PickChecks', not Checks'.
	if len(rep.Checks()) != len(backends)*2*(len(HTTPModes())-2) {
		t.Errorf("%d checks for %d rows", len(rep.Checks()), len(rep.Rows))
	}
	if picks := rep.PickChecks(); len(picks) != len(backends)*2 || picks[0].Default.Chose != SinglePacket || picks[0].Naive.Mode != SinglePacket {
		t.Errorf("pick checks %+v: want auto against single-packet, its pick, at each target and N", picks)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"http-spin: auto chose single-packet", "http-spin user-http: one net/http.Client",
		"http-spin N=3: default (auto)", "vs user-http", "vs barrier", "vs naive", "vs last-byte",
		"auto is the mode it picks", "http-spin N=3: auto (chose single-packet)", "vs single-packet"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if len(backends) == 2 {
		opt, err := benchRedisOptions(redisURL())
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		for _, p := range rep.Prefixes[HTTPRedis] {
			id, _ := runs.RunOf(p)
			if left, _ := rdb.Keys(context.Background(), runs.Prefix(id)+"*").Result(); len(left) > 0 {
				t.Errorf("the bench left %v behind (its keys or its registration)", left)
			}
		}
		if len(rep.Prefixes[HTTPRedis]) != 1 {
			t.Errorf("prefixes %v, want one for http-redis", rep.Prefixes)
		}
	}
}

// The proxy cell, small, on the local PostgreSQL: the proxy mode exposes
// the race in every burst at N=2 with both requests held together, the
// other mode's figure is printed beside it, and every mode's figures are
// the store's: the keys with more than one row in the target's table are
// the bursts counted as exposed, and its rows the writes. The table is
// gone afterwards.
func TestProxyCellPostgres(t *testing.T) {
	ctx := context.Background()
	url := testenv.URL("postgres")
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		testenv.Unavailable(t, "postgres", err)
		return
	}
	defer admin.Close(ctx)
	var inStore struct{ exposed, rows int }
	cfg := Config{Backends: []string{HTTPPostgres}, HTTPAttempts: []int{2}, Bursts: 6, Chunk: 3,
		HTTPModes: []string{Proxy, SinglePacket, Auto}, Conn: serverConns(),
		noWarmUp: true, // the warm-up's bursts write to the store, uncounted
		inspect: func(backend, prefix string) {
			table := prefix + "writes"
			err := admin.QueryRow(ctx, "SELECT count(*) FILTER (WHERE n > 1), coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM "+
				table+" GROUP BY k) AS per_key").Scan(&inStore.exposed, &inStore.rows)
			if err != nil {
				t.Errorf("reading %s: %v", table, err)
			}
		}}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if why, ok := rep.Skipped[HTTPPostgres]; ok {
		t.Fatalf("skipped though PostgreSQL answers: %s", why)
	}
	rows := map[string]Row{}
	exposed := 0
	for _, r := range rep.Rows {
		rows[r.Mode] = r
		exposed += r.Exposed
	}
	px, ok := rows[Proxy]
	if !ok || len(rows) != 3 {
		t.Fatalf("rows %+v: want proxy, single-packet and auto", rep.Rows)
	}
	if px.Bursts != 6 || px.Exposed != 6 || px.Met != 6 || px.Errors != 0 {
		t.Errorf("proxy row %+v: want the race in 6 of 6 bursts, both requests held together in each", px)
	}
	if rows[SinglePacket].Met != 0 {
		t.Errorf("single-packet counted %d bursts held by the proxy, which it never goes through", rows[SinglePacket].Met)
	}
	if inStore.exposed != exposed || inStore.rows < 12+rows[SinglePacket].Bursts+rows[Auto].Bursts {
		t.Errorf("the store holds %d keys written more than once and %d rows; the report counts %d exposed bursts",
			inStore.exposed, inStore.rows, exposed)
	}
	if c := rep.PickChecks(); len(c) != 1 || c[0].Default.Mode != Auto || c[0].Naive.Mode != SinglePacket || len(rep.Checks()) != 0 {
		t.Errorf("checks %+v and %+v: auto is held to single-packet, its pick; the proxy is reported beside the families, never in them", rep.Checks(), c)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"http-postgres N=2: proxy exposed 100.0% of 6 bursts", "all met at the hold point in 6",
		"through racetest proxy at 127.0.0.1:", "http-postgres proxy: the same endpoint"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if !regexp.MustCompile(`proxy exposed .*; beside it single-packet [0-9.]+%, auto [0-9.]+%`).MatchString(out.String()) {
		t.Errorf("the proxy's figure does not show the other modes' beside it:\n%s", out.String())
	}
	for _, p := range rep.Prefixes[HTTPPostgres] {
		var left int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename LIKE $1", p+"%").Scan(&left); err != nil || left != 0 {
			t.Errorf("the bench left %d tables under %s (%v)", left, p, err)
		}
	}
}

// A database-backed target whose server does not answer is skipped, named
// with the address, as the servers' cells are; the proxy started for it
// fails first and says so the same way.
func TestSQLTargetSkipped(t *testing.T) {
	for _, modes := range [][]string{{Auto}, {Auto, Proxy}} {
		cfg := Config{Backends: []string{HTTPPostgres}, HTTPAttempts: []int{2}, Bursts: 2, Chunk: 1, HTTPModes: modes,
			Conn: scenarios.NewConnections(map[string]string{"postgres": "postgres://postgres@127.0.0.1:9/test?sslmode=disable"})}
		rep, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if why := rep.Skipped[HTTPPostgres]; !strings.Contains(why, "127.0.0.1:9") || len(rep.Rows) != 0 {
			t.Errorf("modes %v: skipped %q, rows %d: want it skipped, naming 127.0.0.1:9", modes, why, len(rep.Rows))
		}
	}
}
