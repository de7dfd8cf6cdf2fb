package release

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/builtin"
)

// patientWait is long enough that, even on a loaded machine, every attempt
// parks before it: tests then count, they never time.
const patientWait = 3 * time.Second

func conns() scenarios.Connections {
	return testenv.Conns("redis", "mysql", "postgres", "mongo")
}

// heldLog records every request a wire held back, by worker.
type heldLog struct {
	mu   sync.Mutex
	reqs map[int][][]byte
}

func (l *heldLog) record(worker int, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reqs == nil {
		l.reqs = map[int][][]byte{}
	}
	l.reqs[worker] = append(l.reqs[worker], bytes.Clone(p))
}

func (l *heldLog) all() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]byte
	for _, rs := range l.reqs {
		out = append(out, rs...)
	}
	return out
}

// build makes scenario on backend with the wire as its dial hook, or skips
// when the server is absent.
func build(t *testing.T, w *Wire, scenario, backend string, n int) runner.Target {
	t.Helper()
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: n, Replicas: 1, Conn: conns(), Dial: w.Dial}
	if err, ok := absent.Load(backend); ok {
		testenv.Unavailable(t, backend, err.(error))
	}
	tg, err := builtin.Registry().Build(context.Background(), scenario, backend, p)
	if err != nil {
		var unknown *scenarios.UnknownError
		if errors.As(err, &unknown) {
			t.Fatal(err)
		}
		absent.Store(backend, err)
		testenv.Unavailable(t, backend, err)
	}
	return tg
}

// absent holds the servers found unavailable in this test binary, so that
// every later test on one skips at once: the MongoDB driver spends its
// server-selection time-out (3 s) on each try, and eight tries were 24 of
// the package's 30 seconds without a MongoDB, paid again by every mutant of
// a mutation run (scripts/mutation.sh release).
var absent sync.Map // backend name → the error that said so

func run(t *testing.T, tg runner.Target, w *Wire, n, bursts int) *runner.Result {
	t.Helper()
	res, err := runner.Run(context.Background(), tg, runner.Attempts(n), runner.Bursts(bursts), runner.Release(w))
	if err != nil {
		t.Fatal(err)
	}
	if res.CleanupErr != nil {
		t.Error(res.CleanupErr)
	}
	if c, ok := tg.(runner.Closer); ok {
		c.Close()
	}
	return res
}

// What is held back is each attempt's own first statement — not a BEGIN the
// driver sends before the first step, not a prepare, not racetest's setup
// or counting — on every built-in scenario of every wire backend, with the
// drivers racetest ships. Every attempt that sends a request is held, none
// goes out late, and the scenarios still count what they should.
func TestHeldRequestIsTheFirstStep(t *testing.T) {
	first := map[string]map[string]string{
		"redis": {
			scenarios.MemorySet: "evalsha", scenarios.CheckThenWrite: "exists", scenarios.ConditionalUpdate: "evalsha",
			scenarios.UniqueInsert: "set", scenarios.TTLLease: "evalsha",
		},
		"mysql": {
			scenarios.MemorySet: "INSERT INTO", scenarios.CheckThenWrite: "SELECT id FROM", scenarios.ConditionalUpdate: "UPDATE",
			scenarios.UniqueInsert: "INSERT INTO", scenarios.TTLLease: "UPDATE",
		},
		"postgres": {
			scenarios.MemorySet: "INSERT INTO", scenarios.CheckThenWrite: "SELECT id FROM", scenarios.ConditionalUpdate: "UPDATE",
			scenarios.UniqueInsert: "INSERT INTO", scenarios.TTLLease: "WITH taken AS",
		},
		// The command's name, exactly: never a hello (a handshake, a
		// monitor's heartbeat) nor a ping.
		"mongo": {
			scenarios.MemorySet: "insert", scenarios.CheckThenWrite: "find", scenarios.ConditionalUpdate: "findAndModify",
			scenarios.UniqueInsert: "insert", scenarios.TTLLease: "findAndModify",
		},
	}
	const n, bursts = 4, 5
	for _, backend := range []string{"redis", "mysql", "postgres", "mongo"} {
		for _, scenario := range []string{scenarios.MemorySet, scenarios.CheckThenWrite, scenarios.ConditionalUpdate, scenarios.UniqueInsert, scenarios.TTLLease} {
			t.Run(backend+"/"+scenario, func(t *testing.T) {
				w := NewWire(backend, patientWait)
				log := &heldLog{}
				w.held = log.record
				tg := build(t, w, scenario, backend, n)
				res := run(t, tg, w, n, bursts)
				want := first[backend][scenario]
				reqs := log.all()
				if len(reqs) == 0 {
					t.Fatal("nothing was held back")
				}
				for _, r := range reqs {
					if backend == "mongo" {
						if got := mongoCommand(r); got != want {
							t.Errorf("held the command %q (%q), want the attempt's first one (%s)", got, printable(r), want)
						}
						continue
					}
					if !bytes.Contains(bytes.ToLower(r), bytes.ToLower([]byte(want))) {
						t.Errorf("held %q, want the attempt's first statement (%s)", printable(r), want)
					}
				}
				for _, b := range res.Bursts {
					if b.Wire.Late != 0 || b.Wire.Held+b.Wire.Silent != n || b.Wire.Held == 0 {
						t.Errorf("burst %d: %+v, want every attempt that sent a request held, none late", b.Index, b.Wire)
					}
					if b.Outcomes[runner.Error]+b.Outcomes[runner.Unknown] > 0 {
						t.Errorf("burst %d: outcomes %v, errors %v", b.Index, b.Outcomes, res.Errors)
					}
				}
				if res.Release != "last-byte" || !strings.Contains(strings.Join(res.Notes, "\n"), "release: last-byte") {
					t.Errorf("release %q, notes %q: the report must say the run was released at the wire", res.Release, res.Notes)
				}
				// FerretDB's findAndModify is not atomic (see mongostore): its
				// double grants are the server's, not the release's.
				ferret := false
				if f, ok := tg.(interface{ FerretDB() bool }); ok {
					ferret = f.FerretDB()
				}
				safe := scenario != scenarios.MemorySet && scenario != scenarios.CheckThenWrite &&
					!(ferret && (scenario == scenarios.ConditionalUpdate || scenario == scenarios.TTLLease))
				if safe && res.Violations() != 0 {
					t.Errorf("%d bursts over the allowance on a safe scenario", res.Violations())
				}
			})
		}
	}
}

func printable(p []byte) string {
	return strings.Map(func(r rune) rune {
		if r < 32 || r > 126 {
			return '.'
		}
		return r
	}, string(p))
}

// Every worker owns exactly the connections its session opened; racetest's
// own connection (setup, counting) belongs to no worker and is never held,
// and neither is a driver's monitoring connection (mongo's heartbeat, dialled
// in the worker's session).
func TestWorkersOwnTheirConnections(t *testing.T) {
	for _, backend := range []string{"redis", "mysql", "postgres", "mongo"} {
		t.Run(backend, func(t *testing.T) {
			const n = 6
			w := NewWire(backend, patientWait)
			tg := build(t, w, scenarios.ConditionalUpdate, backend, n)
			var owned []int32
			probe := &probeTarget{Target: tg, after: func() {
				for i := range n {
					owned = append(owned, w.slot(i).conns.Load())
				}
			}}
			run(t, probe, w, n, 1)
			for i, c := range owned {
				// go-redis keeps spare idle connections it dialled in the
				// background; one of them may fall in a worker's window.
				if c < 1 || backend != "redis" && c != 1 {
					t.Errorf("worker %d owns %d connections, want its own one", i, c)
				}
			}
		})
	}
}

// probeTarget calls after once the first burst's subject is reset, when the
// fleet is open.
type probeTarget struct {
	runner.Target
	after func()
	once  sync.Once
}

func (p *probeTarget) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	p.once.Do(p.after)
	return p.Target.Reset(ctx, burst)
}

// misbehave wraps a real target so that chosen workers misbehave.
type misbehave struct {
	runner.Target
	attempt func(ctx context.Context, s runner.Session, subj runner.Subject, w *runner.Worker) runner.Outcome
}

func (m *misbehave) Open(ctx context.Context, replica, workers int) (runner.App, error) {
	a, err := m.Target.Open(ctx, replica, workers)
	return &misApp{a, m}, err
}

type misApp struct {
	runner.App
	m *misbehave
}

func (a *misApp) Session(ctx context.Context, worker int) (runner.Session, error) {
	s, err := a.App.Session(ctx, worker)
	return &misSession{s, a.m}, err
}

type misSession struct {
	runner.Session
	m *misbehave
}

func (s *misSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	return s.m.attempt(ctx, s.Session, subj, w)
}

// An attempt that fails before its first request never parks; the others
// must not wait for it (the wait here is far longer than the test).
func TestAttemptThatNeverWritesDoesNotHoldTheBurst(t *testing.T) {
	const n = 4
	w := NewWire("redis", time.Hour)
	w.writers = 2 // threads sharing the tails (a burst above soloMax)
	tg := build(t, w, scenarios.ConditionalUpdate, "redis", n)
	m := &misbehave{Target: tg, attempt: func(ctx context.Context, s runner.Session, subj runner.Subject, wk *runner.Worker) runner.Outcome {
		if wk.ID == 0 {
			wk.Mark("act")
			return runner.Failed(errors.New("refused before writing"))
		}
		return s.Attempt(ctx, subj, wk)
	}}
	done := make(chan *runner.Result, 1)
	go func() { done <- run(t, m, w, n, 3) }()
	select {
	case res := <-done:
		for _, b := range res.Bursts {
			if b.Wire != (runner.WireCounts{Held: n - 1, Silent: 1}) {
				t.Errorf("burst %d: %+v, want %d held and the failed attempt silent", b.Index, b.Wire, n-1)
			}
		}
	case <-time.After(time.Minute):
		t.Fatal("the burst waited for an attempt that had already returned")
	}
}

// An attempt that reaches its request only after the bounded wait is sent
// late, on its own; the others were released without it and the report
// counts it as not synchronized.
func TestLateAttemptIsReleasedWithoutAndCounted(t *testing.T) {
	const n = 3
	w := NewWire("mysql", 300*time.Millisecond)
	w.writers = 1 // the single loop, whatever soloMax says
	tg := build(t, w, scenarios.UniqueInsert, "mysql", n)
	m := &misbehave{Target: tg, attempt: func(ctx context.Context, s runner.Session, subj runner.Subject, wk *runner.Worker) runner.Outcome {
		if wk.ID == 0 {
			wk.Mark("stall")
			time.Sleep(1500 * time.Millisecond)
		}
		return s.Attempt(ctx, subj, wk)
	}}
	res := run(t, m, w, n, 2)
	for _, b := range res.Bursts {
		if b.Wire != (runner.WireCounts{Held: n - 1, Late: 1}) {
			t.Errorf("burst %d: %+v, want %d held and 1 late", b.Index, b.Wire, n-1)
		}
		if b.Effects != 1 || b.Outcomes[runner.Error] != 0 {
			t.Errorf("burst %d: %d effects, outcomes %v: the late request must still run normally", b.Index, b.Effects, b.Outcomes)
		}
	}
	if note := strings.Join(res.Notes, "\n"); !strings.Contains(note, "2 were not synchronized") {
		t.Errorf("notes %q, want them to count the late attempts", note)
	}
}

// A request bigger than the driver's write buffer goes out in several
// writes: the first is held, the rest follow once it is released, and the
// server gets the whole request intact.
func TestRequestInSeveralWrites(t *testing.T) {
	w := NewWire("redis", patientWait)
	opt, err := redis.ParseURL(testenv.URL("redis"))
	if err != nil {
		t.Fatal(err)
	}
	opt.Dialer = w.Dial
	cl := redis.NewClient(opt)
	defer cl.Close()
	ctx := w.Context(context.Background(), 0)
	end := w.Claim(0)
	cn := cl.Conn()
	err = cn.Ping(ctx).Err()
	end()
	if err != nil {
		testenv.Unavailable(t, "redis", err)
	}
	defer cn.Close()
	key := "racetest_" + scenarios.NewRunID() + "_big"
	defer cl.Del(context.Background(), key)
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	w.Begin(1)
	w.Arm(0)
	errc := make(chan error, 1)
	go func() {
		errc <- cn.Set(ctx, key, big, time.Minute).Err()
		w.Finished(0)
	}()
	w.Release(context.Background())
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, how := w.Sent(0); how != runner.SentHeld {
		t.Errorf("sent %v, want held", how)
	}
	got, err := cl.Get(context.Background(), key).Result()
	if err != nil || got != big {
		t.Fatalf("the server holds %d bytes (err %v), want the %d sent", len(got), err, len(big))
	}
}

// With interpolateParams=false go-sql-driver prepares each statement with
// arguments in a round trip of its own: the prepare goes out at once and
// the execute is what is held.
func TestMySQLPrepareIsNotHeld(t *testing.T) {
	w := NewWire("mysql", patientWait)
	log := &heldLog{}
	w.held = log.record
	cfg, err := sqldb.MySQLConfig(testenv.Conn("mysql"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = false
	cfg.DialFunc = w.Dial
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	ctx := w.Context(context.Background(), 0)
	conn, err := db.Conn(ctx)
	if err == nil {
		err = conn.PingContext(ctx)
	}
	if err != nil {
		testenv.Unavailable(t, "mysql", err)
	}
	defer conn.Close()
	var got int
	heldOnce(t, w, func() error { return conn.QueryRowContext(ctx, "SELECT ? + 1", 41).Scan(&got) })
	if got != 42 {
		t.Errorf("SELECT 41 + 1 = %d", got)
	}
	reqs := log.all()
	if len(reqs) != 1 || len(reqs[0]) < 5 || reqs[0][4] != 0x17 {
		t.Errorf("held %q, want one COM_STMT_EXECUTE (0x17), not the prepare", reqs)
	}
}

// pgx's default exec mode prepares a new statement (Parse, Describe, Sync)
// before it binds and executes it: the execute is what is held.
func TestPostgresPrepareIsNotHeld(t *testing.T) {
	w := NewWire("postgres", patientWait)
	log := &heldLog{}
	w.held = log.record
	cfg, err := pgx.ParseConfig(testenv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = w.Dial
	ctx := w.Context(context.Background(), 0)
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		testenv.Unavailable(t, "postgres", err)
	}
	defer c.Close(context.Background())
	var got int
	heldOnce(t, w, func() error { return c.QueryRow(ctx, "SELECT $1::int + 1", 41).Scan(&got) })
	if got != 42 {
		t.Errorf("SELECT 41 + 1 = %d", got)
	}
	reqs := log.all()
	if len(reqs) != 1 || reqs[0][0] != 'B' {
		t.Errorf("held %q, want one Bind/Execute, not the Parse/Describe of the prepare", reqs)
	}
}

// heldOnce runs f as worker 0's attempt in a one-worker wave.
func heldOnce(t *testing.T, w *Wire, f func() error) {
	t.Helper()
	w.Begin(1)
	w.Arm(0)
	errc := make(chan error, 1)
	go func() {
		errc <- f()
		w.Finished(0)
	}()
	w.Release(context.Background())
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, how := w.Sent(0); how != runner.SentHeld {
		t.Errorf("sent %v, want held", how)
	}
}

// A mongo client's monitor sends only hello: dialled, or probing, while a
// worker's session is being opened, its connection is not the worker's; the
// session's first other write (its ping) claims the connection it goes on.
func TestMongoHelloDoesNotClaim(t *testing.T) {
	w := NewWire("mongo", patientWait)
	ln := sink(t)
	end := w.Claim(0)
	monitor, err := w.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer monitor.Close()
	pool, err := w.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, c := range []net.Conn{monitor, pool} {
		if _, err := c.Write(opMsgCommand("hello")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Write(opMsgCommand("ping")); err != nil {
		t.Fatal(err)
	}
	end()
	if n := w.slot(0).conns.Load(); n != 1 {
		t.Errorf("worker 0 owns %d connections, want the one its ping went on", n)
	}
	if s := monitor.(*conn).slot.Load(); s != nil {
		t.Errorf("the connection that only said hello belongs to worker %d", s.worker)
	}
}

// mongo gives each worker a client of its own under a wire release: every
// attempt that sends a request is held, with a short heartbeat so that the
// monitors probe during the run, and none goes out late.
func TestMongoIsReleasedAtTheWire(t *testing.T) {
	const n = 4
	uri := testenv.Conn("mongo")
	if uri != "" {
		sep := "?"
		if strings.Contains(uri, "?") {
			sep = "&"
		}
		uri += sep + "heartbeatFrequencyMS=500"
	}
	w := NewWire("mongo", patientWait)
	log := &heldLog{}
	w.held = log.record
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: n, Replicas: 2, Dial: w.Dial, Gap: 100 * time.Millisecond,
		Conn: scenarios.NewConnections(map[string]string{"mongo": uri})}
	if err, ok := absent.Load("mongo"); ok {
		testenv.Unavailable(t, "mongo", err.(error))
	}
	tg, err := builtin.Registry().Build(context.Background(), scenarios.CheckThenWrite, "mongo", p)
	if err != nil {
		absent.Store("mongo", err)
		testenv.Unavailable(t, "mongo", err)
	}
	res, err := runner.Run(context.Background(), tg, runner.Attempts(n), runner.Replicas(2), runner.Bursts(8), runner.Release(w))
	if err != nil {
		t.Fatal(err)
	}
	if res.CleanupErr != nil {
		t.Error(res.CleanupErr)
	}
	if res.Release != "last-byte" {
		t.Fatalf("release %q, notes %q: want last-byte", res.Release, res.Notes)
	}
	for _, b := range res.Bursts {
		if b.Wire.Late != 0 || b.Wire.Held != n {
			t.Errorf("burst %d: %+v, want all %d attempts held", b.Index, b.Wire, n)
		}
	}
	for _, r := range log.all() {
		if got := mongoCommand(r); got != "find" {
			t.Errorf("held %q (%q), want the check's find", got, printable(r))
		}
	}
}

// A few tails are written by one thread, more by one thread per CPU; a
// count set on the Wire wins.
func TestWritersFor(t *testing.T) {
	w := NewWire("redis", 0)
	if got := w.writersFor(2); got != 1 {
		t.Errorf("2 tails: %d writers, want 1", got)
	}
	if got := w.writersFor(soloMax); got != 1 {
		t.Errorf("%d tails: %d writers, want 1", soloMax, got)
	}
	if got := w.writersFor(soloMax + 1); got != runtime.GOMAXPROCS(0) {
		t.Errorf("%d tails: %d writers, want one per CPU (%d)", soloMax+1, got, runtime.GOMAXPROCS(0))
	}
	w = NewWireWith("redis", WireOptions{Writers: 3})
	if got := w.writersFor(2); got != 3 {
		t.Errorf("Writers: 3 set, 2 tails: %d writers, want 3", got)
	}
}

// sink listens on a free local port until the test ends, and reads and
// drops whatever each connection sends.
func sink(t *testing.T) net.Listener {
	return serve(t, func(c net.Conn) { io.Copy(io.Discard, c) })
}

// serve listens on a free local port until the test ends, and runs handle
// on each connection (closed when handle returns).
func serve(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln
}

// The settle pause follows held writes only: a wave in which nothing was
// held (every attempt failed before its first request, or the run was
// interrupted) is released at once, whatever Settle says.
func TestSettleOnlyAfterHeldWrites(t *testing.T) {
	w := NewWireWith("redis", WireOptions{Settle: time.Hour, ParkWait: time.Millisecond})
	w.Begin(2)
	w.Finished(0)
	w.Finished(1)
	done := make(chan struct{})
	go func() { w.Release(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a release with nothing held waited out the settle pause")
	}
}

// writeConn is a connection whose writes call write.
type writeConn struct {
	net.Conn
	write func(p []byte) (int, error)
}

func (c *writeConn) Write(p []byte) (int, error) { return c.write(p) }

// Above one writer, the tails are shared among threads that write at once:
// here the first share's write returns only once the second share's was
// written, which only a second thread can do while the first waits. A
// helper the machine does not run within helperWait leaves its share to
// the release's loop (which then writes the tails in turn, here after the
// first one's wait), so on a loaded machine one try can be alone: the
// test tries up to five times, and a release that never shares fails
// every one.
func TestWriteAllSharesTheTailsAmongWriters(t *testing.T) {
	var parked []*park
	shared := false
	for try := 0; try < 5 && !shared; try++ {
		w := NewWireWith("redis", WireOptions{Writers: 2})
		second := make(chan struct{})
		alone := false
		first := &writeConn{write: func(p []byte) (int, error) {
			select {
			case <-second:
			case <-time.After(2 * time.Second):
				alone = true
			}
			return len(p), nil
		}}
		other := &writeConn{write: func(p []byte) (int, error) { close(second); return len(p), nil }}
		parked = []*park{{c: &conn{Conn: first}, tail: []byte("a")}, {c: &conn{Conn: other}, tail: []byte("b")}}
		w.writeAll(parked)
		shared = !alone
	}
	if !shared {
		t.Error("one thread wrote both tails in turn, five times: with 2 writers each takes its share at once")
	}
	for i, pk := range parked {
		if pk.n != 1 || pk.at.IsZero() {
			t.Errorf("tail %d: %d bytes written at %v, want its byte, once", i, pk.n, pk.at)
		}
	}
}

// Settle set, the release leaves the server the CPUs that long after a held
// write before it wakes the attempts.
func TestSettlePausesAfterHeldWrites(t *testing.T) {
	const settle = 50 * time.Millisecond
	w := NewWireWith("redis", WireOptions{Settle: settle, ParkWait: time.Millisecond})
	w.Begin(1)
	pk := &park{c: &conn{Conn: &writeConn{write: func(p []byte) (int, error) { return len(p), nil }}}, s: w.slot(0), tail: []byte("x"), wake: make(chan struct{})}
	w.mu.Lock()
	w.parked = append(w.parked, pk)
	w.pending = 0
	w.mu.Unlock()
	start := time.Now()
	w.Release(context.Background())
	if took := time.Since(start); took < settle {
		t.Errorf("the release woke the attempts %v after the held write, want at least the settle pause (%v)", took, settle)
	}
	if at, how := w.Sent(0); how != runner.SentHeld || at.IsZero() {
		t.Errorf("the held write: %v at %v, want SentHeld with its time", how, at)
	}
}

// By default a wave waits DefaultParkWait (100 ms) for its attempts to
// park before it writes what is held: an attempt a few milliseconds behind
// the others is waited for, not sent late.
func TestReleaseWaitsForAttemptsByDefault(t *testing.T) {
	w := NewWire("redis", 0)
	w.Begin(1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		w.Finished(0)
	}()
	start := time.Now()
	w.Release(context.Background())
	if took := time.Since(start); took < 15*time.Millisecond {
		t.Errorf("the release went %v after the gate, before its attempt (20 ms behind) parked or finished: want the default park wait, 100 ms", took)
	}
}

// A held request waits for the release well past the park wait (its own
// bound, selfRelease, is seconds): a release that comes late is still the
// one that sends it.
func TestHeldRequestWaitsForTheRelease(t *testing.T) {
	w := NewWireWith("redis", WireOptions{ParkWait: time.Millisecond})
	w.Begin(1)
	c := &conn{Conn: &writeConn{write: func(p []byte) (int, error) { return len(p), nil }}, w: w}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := w.hold(c, w.slot(0), []byte("*1\r\n$4\r\nPING\r\n")); err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	w.Release(context.Background())
	<-done
	if _, how := w.Sent(0); how != runner.SentHeld {
		t.Errorf("the request went out %v, want held until the release (50 ms after the park wait)", how)
	}
}

// An attempt whose request went out without being held (its head's write
// failed, or it came after the release) stops the wave waiting for it, as
// one that parked does.
func TestSettledAttemptIsNotWaitedFor(t *testing.T) {
	w := NewWireWith("redis", WireOptions{ParkWait: time.Hour})
	w.Begin(1)
	w.settle(w.slot(0), runner.SentNothing, time.Time{})
	done := make(chan struct{})
	go func() { w.Release(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the release waited for an attempt that had settled")
	}
}

func (c *writeConn) Close() error { return nil }

// A connection is counted on the worker it was last bound to, and on no
// worker once closed: what Verify's "no connection of its own" reads.
func TestConnectionsAreCountedOnTheirWorker(t *testing.T) {
	w := NewWire("redis", 0)
	c := &conn{Conn: &writeConn{}, w: w}
	c.bind(w.slot(0))
	c.bind(w.slot(1))
	if a, b := w.slot(0).conns.Load(), w.slot(1).conns.Load(); a != 0 || b != 1 {
		t.Errorf("rebound from worker 0 to 1: counts %d and %d, want 0 and 1", a, b)
	}
	c.Close()
	if b := w.slot(1).conns.Load(); b != 0 {
		t.Errorf("closed: worker 1 counts %d, want 0", b)
	}
}

// A held request that no release comes for sends itself once its own
// bound (the park wait and selfRelease, 2 s) is over, whole, and is
// counted late: no connection hangs on a release that is never called.
func TestHeldRequestSendsItselfWithoutARelease(t *testing.T) {
	w := NewWireWith("redis", WireOptions{ParkWait: time.Millisecond})
	w.Begin(1)
	var mu sync.Mutex
	var sent []byte
	c := &conn{Conn: &writeConn{write: func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, p...)
		return len(p), nil
	}}, w: w}
	req := []byte("*1\r\n$4\r\nPING\r\n")
	n, err := w.hold(c, w.slot(0), req)
	if err != nil || n != len(req) {
		t.Fatalf("hold returned %d, %v; want the request's %d bytes written", n, err, len(req))
	}
	if _, how := w.Sent(0); how != runner.SentLate {
		t.Errorf("sent %v, want late: it went out without a release", how)
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(sent, req) {
		t.Errorf("the server got %q, want the request whole", sent)
	}
}

// fakeRedis accepts connections until the test ends, counts the PINGs
// they send, and says which connections the client closed.
type fakeRedis struct {
	ln     net.Listener
	mu     sync.Mutex
	pings  int
	closed int
}

func newFakeRedis(t *testing.T) *fakeRedis {
	t.Helper()
	f := &fakeRedis{}
	f.ln = serve(t, func(c net.Conn) {
		var got []byte
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			f.mu.Lock()
			for bytes.HasPrefix(got, []byte("PING\r\n")) {
				got = got[len("PING\r\n"):]
				f.pings++
			}
			if err != nil {
				f.closed++
			}
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	return f
}

// waitFor polls cond for up to 5 s.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// On Redis the release sends its PINGs, every wave, on a connection of its
// own to the server the held request goes to, before it writes the tail:
// each tail's write finds its wave's PINGs at the server. When the run's
// last connection closes, so does the release's own.
func TestRedisReleaseOccupiesTheServerBeforeTheTails(t *testing.T) {
	f := newFakeRedis(t)
	w := NewWireWith("redis", WireOptions{ParkWait: time.Second})
	nc, err := w.Dial(w.Context(context.Background(), 0), "tcp", f.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*conn)
	tcp := c.Conn
	var seen []int // the PINGs at the server as each tail is written
	c.Conn = &writeConn{Conn: tcp, write: func(p []byte) (int, error) {
		if len(p) == 1 { // a tail
			want := (len(seen) + 1) * DefaultOccupy
			waitFor(func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.pings >= want })
			f.mu.Lock()
			seen = append(seen, f.pings)
			f.mu.Unlock()
		}
		return tcp.Write(p)
	}}
	// The release's own connection is dialled in the background.
	waitFor(func() bool {
		w.occMu.Lock()
		defer w.occMu.Unlock()
		o := w.occs[c.dest]
		return o != nil && o.c != nil
	})
	for wave := 1; wave <= 2; wave++ {
		w.Begin(1)
		w.Arm(0)
		done := make(chan error, 1)
		go func() { _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); done <- err }()
		w.Release(context.Background())
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, how := w.Sent(0); how != runner.SentHeld {
			t.Errorf("wave %d: the request went out %v, want held", wave, how)
		}
	}
	if len(seen) != 2 || seen[0] != DefaultOccupy || seen[1] != 2*DefaultOccupy {
		t.Fatalf("PINGs at the server as each wave's tail was written: %v, want [%d %d]", seen, DefaultOccupy, 2*DefaultOccupy)
	}
	nc.Close()
	tcp.Close() // writeConn's Close does nothing
	if !waitFor(func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.closed == 2 }) {
		t.Fatalf("%d of 2 connections closed: the release's own stays open after the run's last one closed", f.closed)
	}
}

// Only Redis runs every client on one thread: no other protocol gets the
// PINGs, nor Redis when Occupy is below 0.
func TestOnlyRedisIsOccupied(t *testing.T) {
	for _, backend := range []string{"mysql", "postgres", "mongo", "processes"} {
		if w := NewWire(backend, 0); w.occupy != nil {
			t.Errorf("%s: the release sends %q before its tails, want nothing", backend, w.occupy)
		}
	}
	if w := NewWireWith("redis", WireOptions{Occupy: -1}); w.occupy != nil {
		t.Errorf("redis, Occupy -1: the release sends %q, want nothing", w.occupy)
	}
	if w := NewWire("redis", 0); string(w.occupy) != strings.Repeat("PING\r\n", DefaultOccupy) {
		t.Errorf("redis: the release sends %q before its tails, want %d PINGs", w.occupy, DefaultOccupy)
	}
}

// A helper spins for the start at most about helperWait: past it the
// release's loop, which lost its CPU, writes the helper's share itself
// (before the bound, a helper spun as long as that loop waited for a CPU).
func TestSpinUntilGivesUp(t *testing.T) {
	var flag atomic.Bool
	start := time.Now()
	if spinUntil(&flag, time.Millisecond) {
		t.Error("spinUntil reported a flag that was never set")
	}
	if took := time.Since(start); took < time.Millisecond || took > time.Second {
		t.Errorf("spinUntil gave up after %v, want about its bound (1ms)", took)
	}
	go func() { time.Sleep(time.Millisecond); flag.Store(true) }()
	if !spinUntil(&flag, time.Minute) {
		t.Error("spinUntil missed a flag set while it spun")
	}
	if !spinUntil(&flag, 0) {
		t.Error("spinUntil missed a flag already set")
	}
}
