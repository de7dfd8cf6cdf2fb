package mongostore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/runner"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/conformance"
	"github.com/racetest/racetest/scenarios/mongostore"
)

// server finds the MongoDB-compatible server the tests run against:
// RACETEST_MONGO_URI, else the standard local port. It skips the test (or
// fails it under RACETEST_REQUIRE_SERVERS) when none answers.
func server(t *testing.T) (scenarios.Params, mongodb.ServerInfo) {
	t.Helper()
	p := scenarios.Params{Conn: testenv.Conns("mongo"), TTL: scenarios.DefaultTTL}
	info, err := probe(p)
	if err != nil {
		testenv.Unavailable(t, mongostore.Name, err)
	}
	t.Logf("server: %s", info)
	return p, info
}

var probeOnce struct {
	sync.Once
	info mongodb.ServerInfo
	err  error
}

func probe(p scenarios.Params) (mongodb.ServerInfo, error) {
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		probeOnce.info, probeOnce.err = mongostore.Probe(ctx, p)
	})
	return probeOnce.info, probeOnce.err
}

// ferretRace is why a scenario races on FerretDB 1.x: measured in
// shared/mongodb-in-ci.md and again by these tests.
const ferretRace = "FerretDB 1.x performs findAndModify as read, change in Go, replace by _id: " +
	"the filter is not re-checked at write time, so several attempts match the same document"

func TestConformance(t *testing.T) {
	p, info := server(t)
	s := conformance.Suite{Registry: testenv.Registry(mongostore.Register), Backend: mongostore.Name, Params: p}
	if info.FerretDB() {
		s.Override = map[string]conformance.Override{
			scenarios.ConditionalUpdate: {Expect: scenarios.ExpectRace, Why: ferretRace},
			scenarios.TTLLease:          {Expect: scenarios.ExpectRace, Why: ferretRace},
		}
	}
	conformance.Run(t, s)
}

// build makes scenario on the test server with a fresh run id; it returns
// the target and the prefix of everything the run will make.
func build(t *testing.T, p scenarios.Params, scenario string, attempts int) (runner.Target, string) {
	t.Helper()
	p.RunID = scenarios.NewRunID()
	p.Attempts, p.Replicas = attempts, max(p.Replicas, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tg, err := testenv.Registry(mongostore.Register).Build(ctx, scenario, mongostore.Name, p)
	if err != nil {
		t.Fatalf("build %s: %v", scenario, err)
	}
	return tg, p.Prefix()
}

// client connects to the test server for the test's own bookkeeping.
func client(t *testing.T, p scenarios.Params) *mongo.Database {
	t.Helper()
	uri := p.Conn.Get("mongo")
	if uri == "" {
		uri = mongodb.DefaultURI
	}
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	db := mongodb.DefaultDatabase
	if cs, err := connstring.Parse(uri); err == nil && cs.Database != "" {
		db = cs.Database
	}
	return c.Database(db)
}

func TestOneActivePerUser(t *testing.T) {
	p, info := server(t)
	p.Variant = mongostore.VariantOneActive
	tg, prefix := build(t, p, scenarios.UniqueInsert, 8)
	defer func() {
		if left := runCollections(t, client(t, p), prefix); len(left) > 0 {
			t.Errorf("the run left %v behind", left)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, tg, runner.Attempts(8), runner.Bursts(10))
	if info.FerretDB() {
		// FerretDB 1.x refuses partialFilterExpression: the run must stop at
		// Prepare with an error that names the server and its limitation.
		if err == nil {
			t.Fatalf("%s accepted the partial unique index; mongodb-in-ci.md says it refuses it: update the expectation", info)
		}
		for _, want := range []string{"FerretDB", "partialFilterExpression", "238", "NotImplemented", "run this variant against MongoDB"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		t.Logf("refused as expected: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, b := range res.Bursts {
		if b.Effects != 1 {
			t.Errorf("burst %d: %d active documents for the user, want 1 (outcomes %v)", b.Index, b.Effects, b.Outcomes)
		}
	}
	if len(res.Checks) != 1 || !res.Checks[0].OK {
		t.Errorf("checks %+v, want one passing 'one active per user'", res.Checks)
	}
}

// snapshot is every collection of db that this test did not make, with its
// documents (raw bytes, by _id) and index specifications.
func snapshot(t *testing.T, db *mongo.Database, names ...string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	for _, name := range names {
		cur, err := db.Collection(name).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			out[name] = append(out[name], string(d))
		}
		specs, err := db.Collection(name).Indexes().ListSpecifications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			out[name] = append(out[name], fmt.Sprintf("index %s %s unique=%v", s.Name, s.KeysDocument, s.Unique != nil && *s.Unique))
		}
	}
	return out
}

func runCollections(t *testing.T, db *mongo.Database, prefix string) []string {
	t.Helper()
	names, err := db.ListCollectionNames(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			mine = append(mine, n)
		}
	}
	return mine
}

// TestOnlyWhatItMade: collections racetest did not make — one of the user's,
// and one that looks like another run's — are identical after a normal run
// and after a run cancelled mid-way, and the runs leave nothing behind.
func TestOnlyWhatItMade(t *testing.T) {
	p, _ := server(t)
	db := client(t, p)
	ctx := context.Background()
	suffix := scenarios.NewRunID()
	user, other := "orders_"+suffix, "racetest_"+suffix+"x_effects"
	for _, name := range []string{user, other} {
		coll := db.Collection(name)
		if _, err := coll.InsertMany(ctx, []any{
			bson.D{{Key: "_id", Value: 1}, {Key: "key", Value: "racetest_" + suffix + "_0"}, {Key: "status", Value: "issued"}},
			bson.D{{Key: "_id", Value: 2}, {Key: "key", Value: "a"}, {Key: "n", Value: 3.5}, {Key: "at", Value: time.UnixMilli(1700000000000).UTC()}},
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "key", Value: 1}}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = coll.Drop(context.Background()) })
	}
	before := snapshot(t, db, user, other)

	for _, sc := range []string{scenarios.CheckThenWrite, scenarios.ConditionalUpdate, scenarios.TTLLease} {
		t.Run(sc+"/complete", func(t *testing.T) {
			tg, prefix := build(t, p, sc, 4)
			if _, err := runner.Run(ctx, tg, runner.Attempts(4), runner.Bursts(5)); err != nil {
				t.Fatalf("run: %v", err)
			}
			if left := runCollections(t, db, prefix); len(left) > 0 {
				t.Errorf("the run left %v behind", left)
			}
		})
		t.Run(sc+"/cancelled", func(t *testing.T) {
			tg, prefix := build(t, p, sc, 4)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			res, err := runner.Run(cctx, tg, runner.Attempts(4), runner.Bursts(1000),
				runner.OnProgress(func(pr runner.Progress) {
					if pr.Done == 3 {
						cancel()
					}
				}))
			if !errors.Is(err, context.Canceled) || !res.Interrupted {
				t.Fatalf("run: err %v, interrupted %v; want a cancelled run", err, res.Interrupted)
			}
			if res.CleanupErr != nil {
				t.Errorf("cleanup after cancel: %v", res.CleanupErr)
			}
			if left := runCollections(t, db, prefix); len(left) > 0 {
				t.Errorf("the cancelled run left %v behind", left)
			}
		})
	}
	if after := snapshot(t, db, user, other); !reflect.DeepEqual(before, after) {
		t.Errorf("collections racetest did not make changed:\nbefore %q\nafter  %q", before, after)
	}
}

// countingDial dials through net.Dialer, counting dials and keeping the
// connections so a test can break them.
type countingDial struct {
	dials atomic.Int64
	mu    sync.Mutex
	conns []*breakable
}

func (d *countingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	b := &breakable{Conn: c}
	d.mu.Lock()
	d.conns = append(d.conns, b)
	d.mu.Unlock()
	return b, nil
}

// breakAll makes every connection dialled so far fail its next write, as a
// server that went away would.
func (d *countingDial) breakAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.broken.Store(true)
	}
}

type breakable struct {
	net.Conn
	broken atomic.Bool
}

func (b *breakable) Write(p []byte) (int, error) {
	if b.broken.Load() {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return b.Conn.Write(p)
}

// TestDialHook: every connection of the run — the control client, the
// workers' (with a dial hook, each worker's own client), the monitors — is
// dialled through Params.Dial, and all are open before the first burst: no
// attempt waits for a dial.
func TestDialHook(t *testing.T) {
	p, _ := server(t)
	var d countingDial
	p.Dial = d.dial
	p.Replicas = 2
	tg, _ := build(t, p, scenarios.CheckThenWrite, 6)
	built := d.dials.Load()
	if built == 0 {
		t.Fatal("connecting to the server dialled nothing through Params.Dial")
	}
	var afterFirst int64
	res, err := runner.Run(context.Background(), tg, runner.Attempts(6), runner.Replicas(2), runner.Bursts(10),
		runner.OnProgress(func(pr runner.Progress) {
			if pr.Done == 1 {
				afterFirst = d.dials.Load()
			}
		}))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	// Two replicas of 3 workers each: at least 6 pooled connections besides
	// the control client's.
	if opened := afterFirst - built; opened < 6 {
		t.Errorf("%d connections dialled through Params.Dial for 2 replicas × 3 workers, want at least 6", opened)
	}
	if later := d.dials.Load() - afterFirst; later > 0 {
		t.Errorf("%d connections were dialled after the first burst: the pools were not warm", later)
	}
	t.Logf("dials: %d to build, %d by the end of burst 1, %d in all; violations %d/%d",
		built, afterFirst, d.dials.Load(), res.Violations(), len(res.Bursts))

	// A Dial that fails must fail the run's connection: nothing bypasses it.
	p.Dial = func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("dial refused by the test")
	}
	p.RunID = scenarios.NewRunID()
	if _, err := testenv.Registry(mongostore.Register).Build(context.Background(), scenarios.CheckThenWrite, mongostore.Name, p); err == nil {
		t.Error("Build succeeded although Params.Dial refused every connection")
	}
}

// With a dial hook each worker has a client of its own, but the replicas
// stay replicas: memory-set's set is one per replica, so a burst executes at
// most once per replica, as the store counts it.
func TestWorkerClientsKeepReplicas(t *testing.T) {
	p, _ := server(t)
	var d countingDial
	p.Dial = d.dial
	p.Replicas = 2
	tg, _ := build(t, p, scenarios.MemorySet, 6)
	res, err := runner.Run(context.Background(), tg, runner.Attempts(6), runner.Replicas(2), runner.Bursts(10))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, b := range res.Bursts {
		if b.Effects < 1 || b.Effects > 2 {
			t.Errorf("burst %d: %d effects, want 1 or 2 (one per replica at most); outcomes %v", b.Index, b.Effects, b.Outcomes)
		}
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "one client per worker") {
		t.Errorf("notes %q do not say each worker has a client of its own", res.Notes)
	}
}

// TestClassifyErrors: in unique-insert, only the duplicate-key error is
// "declined"; a connection that fails mid-attempt is an error.
func TestClassifyErrors(t *testing.T) {
	p, _ := server(t)
	var d countingDial
	p.Dial = d.dial
	tg, _ := build(t, p, scenarios.UniqueInsert, 1)
	ctx := context.Background()
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tg.Cleanup(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	app, err := tg.Open(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	sess, err := app.Session(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	attempt := func(subj runner.Subject) runner.Outcome {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return sess.Attempt(actx, subj, &runner.Worker{})
	}

	subj, err := tg.Reset(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o := attempt(subj); o.Class != runner.Executed {
		t.Fatalf("first insert: %v %v, want executed", o.Class, o.Err)
	}
	o := attempt(subj)
	if o.Class != runner.Declined || !mongo.IsDuplicateKeyError(o.Err) {
		t.Fatalf("second insert: %v %v, want declined with a duplicate-key error", o.Class, o.Err)
	}

	// Break the worker's connections (the control client's too; it is not
	// used again before Cleanup, which dials afresh if it must).
	subj, err = tg.Reset(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.breakAll()
	o = attempt(subj)
	if o.Class != runner.Error {
		t.Fatalf("insert on a broken connection: %v %v, want error (never declined)", o.Class, o.Err)
	}
	if mongo.IsDuplicateKeyError(o.Err) {
		t.Fatalf("a network failure was taken for a duplicate key: %v", o.Err)
	}
	t.Logf("broken connection counted as error: %v", o.Err)
}

// TestUnreachable: an absent server is reported within seconds, in one
// line that names the address and the cause and never the password.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // a port that was free a moment ago: connection refused
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: 2, Replicas: 1,
		Conn: scenarios.NewConnections(map[string]string{"mongo": "mongodb://racer:s3cr%40t-pw@" + addr + "/?directConnection=true"})}
	start := time.Now()
	_, err = testenv.Registry(mongostore.Register).Build(context.Background(), scenarios.CheckThenWrite, mongostore.Name, p)
	took := time.Since(start)
	if err == nil {
		t.Fatal("Build succeeded against a closed port")
	}
	msg := err.Error()
	for _, want := range []string{"mongo: cannot connect to " + addr, "connection refused", "RACETEST_MONGO_URI", "racer:xxxxx@"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	for _, secret := range []string{"s3cr", "s3cr%40t-pw", "s3cr@t-pw"} {
		if strings.Contains(msg, secret) {
			t.Errorf("error leaks the password (%q): %s", secret, msg)
		}
	}
	// One line: the driver's topology dump says nothing the cause does not
	// (issue 29), but stays behind the error for errors.As.
	if strings.Contains(msg, "topology") || strings.Contains(msg, "\n") {
		t.Errorf("the error carries the driver's topology dump: %s", msg)
	}
	var sse topology.ServerSelectionError
	if !errors.As(err, &sse) {
		t.Errorf("the driver's ServerSelectionError is not behind %v", err)
	}
	// A guard against a hang, not a benchmark: the driver's own default
	// would wait 30 s.
	if took > 20*time.Second {
		t.Errorf("took %s to report an unreachable server", took)
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
}

// TestServerDiesMidRun: when the server goes away during a run, attempts
// fail, the run stops with an error instead of hanging, the bursts that
// finished are kept, and Cleanup names what it could not drop — and drops
// it once the server is back.
func TestServerDiesMidRun(t *testing.T) {
	p, _ := server(t)
	var d countingDial
	var down atomic.Bool
	p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return d.dial(ctx, network, addr)
	}
	tg, prefix := build(t, p, scenarios.CheckThenWrite, 4)
	start := time.Now()
	res, err := runner.Run(context.Background(), tg, runner.Attempts(4), runner.Bursts(1000), runner.Timeout(2*time.Second),
		runner.OnProgress(func(pr runner.Progress) {
			if pr.Done == 3 {
				down.Store(true)
				d.breakAll()
			}
		}))
	took := time.Since(start)
	if err == nil {
		t.Fatalf("the run went on after the server went away (%d bursts)", len(res.Bursts))
	}
	if len(res.Bursts) < 3 {
		t.Errorf("kept %d bursts, want the 3 that finished", len(res.Bursts))
	}
	if res.CleanupErr == nil || !strings.Contains(res.CleanupErr.Error(), prefix) {
		t.Errorf("cleanup error %v does not name the run's collections (%s...)", res.CleanupErr, prefix)
	}
	if took > 45*time.Second { // a hang guard, not a benchmark
		t.Errorf("took %s to give up on a server that went away", took)
	}
	t.Logf("after %s: %v; cleanup: %v", took.Round(time.Millisecond), err, res.CleanupErr)

	down.Store(false)
	if err := tg.Cleanup(context.Background()); err != nil {
		t.Fatalf("cleanup once the server is back: %v", err)
	}
	if left := runCollections(t, client(t, p), prefix); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// straggling cancels the run as burst 1 begins, so that its attempts are
// abandoned, and then plays the insert such an attempt left in flight: it
// lands 200 ms into the cleanup, after the drops.
type straggling struct {
	runner.Target
	cancel  context.CancelFunc
	insert  func()
	landed  chan time.Time
	cleaned time.Time
}

func (s *straggling) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	if burst == 1 {
		s.cancel()
	}
	return s.Target.Reset(ctx, burst)
}

func (s *straggling) Cleanup(ctx context.Context) error {
	go func() {
		time.Sleep(200 * time.Millisecond)
		s.insert()
		s.landed <- time.Now()
	}()
	err := s.Target.Cleanup(ctx)
	s.cleaned = time.Now()
	return err
}

// An insert that a cancelled attempt left in flight can land after the
// cleanup dropped the collections (MongoDB makes a collection on insert):
// the cleanup waits for such stragglers and drops what they made before it
// unregisters the run, so nothing is left that 'clean' would call a
// stranger's.
func TestCleanupDropsALateStraggler(t *testing.T) {
	p, _ := server(t)
	db := client(t, p)
	for trial := 1; ; trial++ {
		tg, prefix := build(t, p, scenarios.UniqueInsert, 4)
		ctx, cancel := context.WithCancel(context.Background())
		s := &straggling{Target: tg, cancel: cancel, landed: make(chan time.Time, 1), insert: func() {
			ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer icancel()
			_, _ = db.Collection(prefix+"effects").InsertOne(ictx, bson.D{{Key: "late", Value: true}})
		}}
		_, err := runner.Run(ctx, s, runner.Attempts(4), runner.Bursts(100))
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v, want a cancelled run", err)
		}
		if c, ok := tg.(runner.Closer); ok {
			c.Close()
		}
		landed := <-s.landed
		left := runCollections(t, db, prefix)
		for _, n := range left {
			_ = db.Collection(n).Drop(context.Background())
		}
		if landed.Before(s.cleaned) {
			if len(left) > 0 {
				t.Fatalf("a straggler that landed during the cleanup left %v", left)
			}
			return
		}
		// The straggler landed after the cleanup ended: either the cleanup
		// did not wait for it (the bug), or the insert itself was slow.
		if trial == 3 {
			t.Fatalf("3 times the cleanup ended before an insert issued 200 ms into it landed (left: %v): it does not wait for stragglers", left)
		}
	}
}

// countingThroughCancel cancels the run as the first burst's effects are
// about to be counted, and keeps what the store's count returned.
type countingThroughCancel struct {
	runner.Target
	cancel context.CancelFunc
	n      int
	err    error
}

func (c *countingThroughCancel) Effects(ctx context.Context, s runner.Subject) (int, error) {
	c.cancel()
	c.n, c.err = c.Target.Effects(ctx, s)
	return c.n, c.err
}

// An interrupt that lands while a burst's effects are counted does not cut
// the count short. Counting moves the effects to the settled collection; an
// insert the client gave up on is still carried out by the server, and one
// that landed after the cleanup dropped that collection made it again (CI,
// TestInterruptsLeaveNothing, 1 run in 680 before this).
func TestEffectsCountedThroughAnInterrupt(t *testing.T) {
	p, _ := server(t)
	db := client(t, p)
	tg, prefix := build(t, p, scenarios.CheckThenWrite, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &countingThroughCancel{Target: tg, cancel: cancel}
	_, err := runner.Run(ctx, c, runner.Attempts(4), runner.Bursts(5))
	if cl, ok := tg.(runner.Closer); ok {
		cl.Close()
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want a cancelled run", err)
	}
	if c.err != nil || c.n < 1 {
		t.Errorf("the count under a cancelled context returned %d, %v; want the burst's effects, counted to the end", c.n, c.err)
	}
	if left := runCollections(t, db, prefix); len(left) > 0 {
		t.Errorf("the interrupted run left %v", left)
	}
}

// TestServerName: a target names the server buildInfo reports.
func TestServerName(t *testing.T) {
	p, info := server(t)
	tg, _ := build(t, p, scenarios.MemorySet, 1)
	defer tg.Cleanup(context.Background())
	if got := tg.(runner.Describer).Server(); got != info.String() {
		t.Errorf("Server() = %q, want %q", got, info.String())
	}
}
