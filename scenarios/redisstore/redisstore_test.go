package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// build makes scenario on Redis at url for a run of n attempts.
func build(t *testing.T, scenario, url string, n int, edit func(*scenarios.Params)) (runner.Target, scenarios.Params) {
	t.Helper()
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: n, Replicas: 1, Conn: scenarios.NewConnections(map[string]string{"redis": url})}
	if edit != nil {
		edit(&p)
	}
	tg, err := testenv.Registry(redisstore.Register).Build(context.Background(), scenario, redisstore.Name, p)
	if err != nil {
		t.Fatalf("build %s: %v", scenario, err)
	}
	return tg, p
}

// prefixKeys lists the keys under prefix.
func prefixKeys(t *testing.T, cl *redis.Client, prefix string) []string {
	t.Helper()
	var all []string
	iter := cl.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		all = append(all, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return all
}

// snapshot is what a key holds, byte for byte, and how long it lives.
type snapshot struct {
	dump string
	ttl  time.Duration
}

func snapshots(t *testing.T, cl *redis.Client, keys []string) map[string]snapshot {
	t.Helper()
	ctx := context.Background()
	out := map[string]snapshot{}
	for _, k := range keys {
		d, err := cl.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		ttl, err := cl.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = snapshot{d, ttl}
	}
	return out
}

// TestOnlyItsOwnKeys runs every scenario to the end and interrupted, next to
// keys racetest did not make — some sharing the start of the run's prefix —
// and checks those keys are byte-for-byte unchanged and the run's own keys
// are gone.
func TestOnlyItsOwnKeys(t *testing.T) {
	cl := testenv.Redis(t)
	ctx := context.Background()
	const runID = "own" // fixed, so that neighbours can share its prefix's start
	mine := "racetest_" + runID + "_"
	tag := scenarios.NewRunID()
	neighbours := []string{
		"racetest_" + runID,                         // the prefix without its "_"
		"racetest_" + runID + "x_b0:effects_" + tag, // a longer run id
		"racetest_" + runID + "*_" + tag,            // a glob character right after the id
		"user:" + tag,
		"racetest_other_" + tag + "_b0:subject",
	}
	for _, k := range neighbours {
		if n, _ := cl.Exists(ctx, k).Result(); n > 0 {
			t.Skipf("key %s already exists on the shared server; not touching it", k)
		}
	}
	t.Cleanup(func() { cl.Del(context.Background(), neighbours...) })
	if err := cl.Set(ctx, neighbours[0], "precious\x00bytes", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cl.RPush(ctx, neighbours[1], "a", "b", "c")
	cl.Set(ctx, neighbours[2], "glob", time.Hour)
	cl.HSet(ctx, neighbours[3], "name", "ada", "visits", 3)
	cl.SAdd(ctx, neighbours[4], "x", "y")
	before := snapshots(t, cl, neighbours)
	if left := prefixKeys(t, cl, mine); len(left) > 0 {
		t.Skipf("keys under %s exist on the shared server (%d); not touching them", mine, len(left))
	}

	for _, sc := range scenarios.Core() {
		for _, cancelled := range []bool{false, true} {
			name := sc.Name
			if cancelled {
				name += "/cancelled"
			}
			t.Run(name, func(t *testing.T) {
				tg, _ := build(t, sc.Name, testenv.URL("redis"), 4, func(p *scenarios.Params) { p.RunID = runID })
				rctx, cancel := context.WithCancel(ctx)
				defer cancel()
				opts := []runner.Option{runner.Attempts(4), runner.Bursts(6)}
				if cancelled {
					opts = append(opts, runner.Bursts(1000), runner.OnProgress(func(pr runner.Progress) {
						if pr.Done == 3 {
							// Keys exist now: the cancelled run must still drop them.
							if len(prefixKeys(t, cl, mine)) == 0 {
								t.Error("no keys under the run's prefix mid-run: the test proves nothing")
							}
							cancel()
						}
					}))
				}
				res, err := runner.Run(rctx, tg, opts...)
				if cancelled {
					if !errors.Is(err, context.Canceled) || !res.Interrupted {
						t.Fatalf("cancelled run: err %v, interrupted %v", err, res.Interrupted)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				if res.CleanupErr != nil {
					t.Fatalf("cleanup: %v", res.CleanupErr)
				}
				if left := prefixKeys(t, cl, mine); len(left) > 0 {
					t.Errorf("keys of the run left behind: %v", left)
				}
				after := snapshots(t, cl, neighbours)
				for _, k := range neighbours {
					b, a := before[k], after[k]
					if b.dump != a.dump {
						t.Errorf("key %s changed: %q → %q", k, b.dump, a.dump)
					}
					if (b.ttl < 0) != (a.ttl < 0) || a.ttl > b.ttl {
						t.Errorf("key %s TTL changed: %s → %s", k, b.ttl, a.ttl)
					}
				}
			})
		}
	}
}

// TestCleanupAfterKeep: with --keep the keys stay for inspection; a later
// Cleanup, called twice, drops them.
func TestCleanupAfterKeep(t *testing.T) {
	cl := testenv.Redis(t)
	tg, p := build(t, scenarios.ConditionalUpdate, testenv.URL("redis"), 3, nil)
	if _, err := runner.Run(context.Background(), tg, runner.Attempts(3), runner.Bursts(4), runner.Keep(true)); err != nil {
		t.Fatal(err)
	}
	kept := prefixKeys(t, cl, p.Prefix())
	if len(kept) != 9 { // a coupon and an effect list per burst, and the run's marker
		t.Errorf("kept %d keys, want 9: %v", len(kept), kept)
	}
	for _, k := range kept {
		if ttl := cl.PTTL(context.Background(), k).Val(); ttl <= 0 {
			t.Errorf("kept key %s has no TTL (PTTL %v): a killed run's keys must expire by themselves", k, ttl)
		}
	}
	for range 2 {
		if err := tg.Cleanup(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if left := prefixKeys(t, cl, p.Prefix()); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestUnreachableFailsFast: a port nobody listens on fails at once, with the
// address and the flag to change, and without the password.
func TestUnreachableFailsFast(t *testing.T) {
	const secret = "s3cr3t-Pw"
	start := time.Now()
	p := scenarios.Params{RunID: "dead", Attempts: 2, Conn: scenarios.NewConnections(map[string]string{"redis": "redis://racer:" + secret + "@127.0.0.1:1/0"})}
	_, err := testenv.Registry(redisstore.Register).Build(context.Background(), scenarios.CheckThenWrite, redisstore.Name, p)
	took := time.Since(start)
	if err == nil {
		t.Fatal("connected to 127.0.0.1:1")
	}
	msg := err.Error()
	t.Logf("after %s: %s", took.Round(time.Millisecond), msg)
	for _, want := range []string{"127.0.0.1:1", "connection refused", "--redis-url", "RACETEST_REDIS_URL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(fmt.Sprintf("%+v %#v", err, err), secret) {
		t.Errorf("the password leaked into the error")
	}
	// Generous: the point is that the driver's five dial attempts with
	// backoff are not in the way, not a timing.
	if took > 10*time.Second {
		t.Errorf("took %s to report a refused connection", took)
	}
}

// TestBadURL: a malformed URL is reported without its password.
func TestBadURL(t *testing.T) {
	const secret = "pw-9z"
	for _, u := range []string{"redis://u:" + secret + "@127.0.0.1:notaport/0", "redis://u:" + secret + "@127.0.0.1:6379/zero", "mysql://u:" + secret + "@h/0"} {
		p := scenarios.Params{RunID: "bad", Attempts: 2, Conn: scenarios.NewConnections(map[string]string{"redis": u})}
		_, err := testenv.Registry(redisstore.Register).Build(context.Background(), scenarios.CheckThenWrite, redisstore.Name, p)
		if err == nil {
			t.Fatalf("%s: accepted", redisdb.Redact(u))
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "--redis-url") {
			t.Errorf("%s: %v", redisdb.Redact(u), err)
		}
	}
}

// TestSilentServer: a server that accepts and never answers is reported
// after the connect timeout, not the driver's.
func TestSilentServer(t *testing.T) {
	f := startFake(t, func(int, []string) string { return "" })
	start := time.Now()
	_, err := testenv.Registry(redisstore.Register).Build(context.Background(), scenarios.CheckThenWrite, redisstore.Name,
		scenarios.Params{RunID: "silent", Attempts: 2, Conn: scenarios.NewConnections(map[string]string{"redis": f.URL()})})
	took := time.Since(start)
	if err == nil {
		t.Fatal("a silent server was accepted")
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), f.Addr()) || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("error does not name the address and the silence: %v", err)
	}
	if took > 10*time.Second {
		t.Errorf("took %s", took)
	}
}

// TestHungServerAttempt: the server answers the handshake and the pings,
// then stops answering. Each attempt ends at its own deadline, as unknown
// (it may have been applied), not after the driver's read timeout (5 s).
func TestHungServerAttempt(t *testing.T) {
	f := startFake(t, func(_ int, args []string) string {
		if r, ok := basics(args); ok {
			return r
		}
		return "" // EXISTS, RPUSH, EVALSHA, SET: silence
	})
	for _, sc := range []string{scenarios.CheckThenWrite, scenarios.ConditionalUpdate, scenarios.UniqueInsert, scenarios.TTLLease} {
		t.Run(sc, func(t *testing.T) {
			tg, _ := build(t, sc, f.URL(), 2, nil)
			defer tg.Cleanup(context.Background())
			// The attempts' own outcomes, read directly from one session.
			app, err := tg.Open(context.Background(), 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close()
			sess, err := app.Session(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			short := func() (context.Context, context.CancelFunc) {
				return context.WithTimeoutCause(context.Background(), 200*time.Millisecond, runner.ErrTimeout)
			}
			ctx, cancel := short()
			defer cancel()
			// conditional-update's Reset issues the coupon: the silence
			// starts there, and it too must end at the caller's deadline.
			subj, err := tg.Reset(ctx, 0)
			if (err != nil) != (sc == scenarios.ConditionalUpdate) {
				t.Fatalf("reset: %v", err)
			}
			ctx, cancel = short()
			defer cancel()
			start := time.Now()
			o := sess.Attempt(ctx, subj, &runner.Worker{})
			took := time.Since(start)
			t.Logf("%s after %s: %v", o.Class, took.Round(time.Millisecond), o.Err)
			if o.Class != runner.Unknown {
				t.Errorf("outcome %s, want unknown: %v", o.Class, o.Err)
			}
			// Generous, but below the driver's 5 s read timeout, which would
			// have ended the call had the context not.
			if took > 2500*time.Millisecond {
				t.Errorf("the attempt lasted %s with a 200ms deadline", took)
			}
			ctx, cancel = short()
			defer cancel()
			if _, err := tg.Effects(ctx, subj); err == nil {
				t.Error("counted effects on a silent server")
			}
		})
	}
}

// TestInsertErrorIsNotDeclined: only SET NX's nil reply is "already done";
// an out-of-memory error, or a read-only replica, is an error.
func TestInsertErrorIsNotDeclined(t *testing.T) {
	var mu sync.Mutex
	reply := ""
	f := startFake(t, func(_ int, args []string) string {
		if r, ok := basics(args); ok {
			return r
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.EqualFold(args[0], "SET") {
			return reply
		}
		return ":1\r\n" // RPUSH
	})
	tg, _ := build(t, scenarios.UniqueInsert, f.URL(), 1, nil)
	defer tg.Cleanup(context.Background())
	app, err := tg.Open(context.Background(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	sess, err := app.Session(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	subj, err := tg.Reset(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		reply string
		want  runner.Class
	}{
		{"+OK\r\n", runner.Executed},
		{"$-1\r\n", runner.Declined},
		{"-OOM command not allowed when used memory > 'maxmemory'.\r\n", runner.Error},
		{"-READONLY You can't write against a read only replica.\r\n", runner.Error},
		{"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", runner.Error},
	} {
		mu.Lock()
		reply = c.reply
		mu.Unlock()
		o := sess.Attempt(context.Background(), subj, &runner.Worker{})
		if o.Class != c.want {
			t.Errorf("SET NX replied %q: outcome %s (%v), want %s", strings.TrimSpace(c.reply), o.Class, o.Err, c.want)
		}
	}
}

// TestTooManyClients: a server at its maxclients limit gets one clear line.
func TestTooManyClients(t *testing.T) {
	var full atomic.Bool
	f := startFake(t, func(conn int, args []string) string {
		switch {
		case full.Load() && conn > 0: // conn 0 is racetest's own, made while there was room
			return "-ERR max number of clients reached\r\n"
		case strings.EqualFold(args[0], "INFO") && full.Load():
			return bulk("# Clients\r\nconnected_clients:3\r\nmaxclients:3\r\n")
		}
		r, _ := basics(args)
		return r
	})
	tg, _ := build(t, scenarios.CheckThenWrite, f.URL(), 40, nil)
	defer tg.Cleanup(context.Background())
	full.Store(true)
	_, err := runner.Run(context.Background(), tg, runner.Attempts(40), runner.Bursts(1))
	if err == nil {
		t.Fatal("the run started on a full server")
	}
	t.Log(err)
	for _, want := range []string{"maxclients limit of 3", "fewer attempts", "raise maxclients"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("more than one line: %q", err)
	}
}

// TestServerDiesMidRun: the run stops with an error naming what failed,
// within seconds, without a panic; the keys the dead server kept are named.
func TestServerDiesMidRun(t *testing.T) {
	cl := testenv.Redis(t)
	opt, _ := redis.ParseURL(testenv.URL("redis"))
	px := startProxy(t, opt.Addr)
	tg, p := build(t, scenarios.CheckThenWrite, "redis://"+px.ln.Addr().String()+"/0", 4, nil)
	t.Cleanup(func() {
		for _, k := range prefixKeys(t, cl, p.Prefix()) {
			cl.Del(context.Background(), k)
		}
	})
	done := make(chan struct{})
	var res *runner.Result
	var err error
	go func() {
		defer close(done)
		res, err = runner.Run(context.Background(), tg, runner.Attempts(4), runner.Bursts(100000), runner.Timeout(time.Second),
			runner.OnProgress(func(pr runner.Progress) {
				if pr.Done == 5 {
					px.kill()
				}
			}))
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not stop after the server died")
	}
	if err == nil {
		t.Fatal("the run went on without its server")
	}
	t.Logf("after %d bursts: %v; cleanup: %v", len(res.Bursts), err, res.CleanupErr)
	if len(res.Bursts) < 5 {
		t.Errorf("the %d bursts before the failure were not kept", len(res.Bursts))
	}
	if res.CleanupErr == nil || !strings.Contains(res.CleanupErr.Error(), p.Prefix()) {
		t.Errorf("cleanup against a dead server does not name the keys left: %v", res.CleanupErr)
	}
}

// TestDialHook: every worker's connection goes through Params.Dial. Each
// attempt of check-then-write sends EXISTS on its worker's connection; the
// hook sees which connections carried one.
func TestDialHook(t *testing.T) {
	testenv.Redis(t)
	var mu sync.Mutex
	var dialled []*spyConn
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s := &spyConn{Conn: c}
		mu.Lock()
		dialled = append(dialled, s)
		mu.Unlock()
		return s, nil
	}
	const n = 5
	tg, _ := build(t, scenarios.CheckThenWrite, testenv.URL("redis"), n, func(p *scenarios.Params) { p.Dial = dial })
	if _, err := runner.Run(context.Background(), tg, runner.Attempts(n), runner.Bursts(3)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	workers := 0
	for _, s := range dialled {
		if s.saw("exists") {
			workers++
		}
	}
	if workers != n {
		t.Errorf("%d connections dialled through the hook carried attempts, want %d (one per worker); %d dialled in all", workers, n, len(dialled))
	}
}

type spyConn struct {
	net.Conn
	mu      sync.Mutex
	written bytes.Buffer
}

func (s *spyConn) Write(b []byte) (int, error) {
	s.mu.Lock()
	s.written.Write(bytes.ToLower(b))
	s.mu.Unlock()
	return s.Conn.Write(b)
}

func (s *spyConn) saw(cmd string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Contains(s.written.Bytes(), []byte("\r\n"+cmd+"\r\n"))
}

// TestServerNamed: the report names the server as it describes itself.
func TestServerNamed(t *testing.T) {
	cl := testenv.Redis(t)
	tg, _ := build(t, scenarios.CheckThenWrite, testenv.URL("redis"), 1, nil)
	defer tg.Cleanup(context.Background())
	info, err := cl.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := tg.(runner.Describer).Server()
	t.Log(got)
	var version string
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			version = v
		}
	}
	if version == "" || !strings.Contains(got, " ") {
		t.Errorf("Server() = %q, INFO says redis_version %q", got, version)
	}
}

// TestLeaseLiveness: a holder that dies blocks the lease until the TTL, by
// the server's clock, and not after it.
func TestLeaseLiveness(t *testing.T) {
	testenv.Redis(t)
	tg, _ := build(t, scenarios.TTLLease, testenv.URL("redis"), 2, func(p *scenarios.Params) { p.TTL = 30*time.Millisecond + 400*time.Microsecond })
	defer tg.Cleanup(context.Background())
	if err := tg.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	checks := tg.(runner.Checker).Checks(context.Background())
	if len(checks) != 1 || !checks[0].OK {
		t.Fatalf("checks %+v", checks)
	}
	t.Log(checks[0].Detail)
	notes := strings.Join(tg.(runner.Noter).Notes(), "\n")
	if !strings.Contains(notes, "31 ms") {
		t.Errorf("the TTL's rounding to whole milliseconds is not noted: %q", notes)
	}
}
