package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target    = (*target)(nil)
	_ runner.Describer = (*target)(nil)
	_ runner.Noter     = (*target)(nil)
)

// kind is one scenario's statements on MongoDB.
type kind struct {
	name string
	// prepare creates the scenario's collections and indexes.
	prepare func(ctx context.Context, t *target) error
	// reset puts the burst's subject in place (an issued coupon, an
	// expired lease); nil when a fresh key is enough.
	reset   func(ctx context.Context, t *target, key string) error
	attempt func(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome
	effects func(ctx context.Context, t *target, key string) (int, error)
}

func factory(k kind) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if p.TTL == 0 {
			p.TTL = scenarios.DefaultTTL
		}
		if vs := variantsOf(k.name); !scenarios.Accepts(vs, p.Variant) {
			known := "none"
			if len(vs) > 0 {
				known = strings.Join(vs, ", ")
			}
			return nil, scenarios.BadParam(fmt.Errorf("mongo: %s has no variant %q (known: %s)", k.name, p.Variant, known))
		}
		c, err := newConn(p)
		if err != nil {
			return nil, err
		}
		client, err := c.connect(ctx, c.options(0))
		if err != nil {
			return nil, err
		}
		db := client.Database(c.database)
		bctx, cancel := context.WithTimeout(ctx, controlTimeout)
		defer cancel()
		info, err := mongodb.BuildInfo(bctx, db)
		if err != nil {
			_ = disconnect(client)
			return nil, err
		}
		return &target{kind: k, p: p, conn: c, control: client, db: db, server: info}, nil
	}
}

// target is one scenario on one MongoDB database. Its control client does
// racetest's own work (Prepare, Reset, Effects, Cleanup); the workers never
// use it.
type target struct {
	kind    kind
	p       scenarios.Params
	conn    conn
	control *mongo.Client
	db      *mongo.Database
	server  mongodb.ServerInfo

	mu         sync.Mutex
	created    []string // collections Prepare made, the only ones Cleanup drops
	registered bool     // the run is in racetest_runs (see package runs)
	notes      []string

	// lease holds ttl-lease's clock; set by Prepare.
	lease leaseClock
	// redemptions and effectsSeen compare conditional-update's $inc counter
	// with the effects documents, to show FerretDB's lost updates.
	redemptions, effectsSeen atomic.Int64
	// abandoned: an attempt's context ended (Ctrl-C, --timeout) while it
	// may have had an operation in flight, which the server can still
	// carry out after the cleanup dropped the collections (see
	// dropStragglers).
	abandoned atomic.Bool
	inFlight  atomic.Int32 // attempts under way (a hung one never returns)
}

// coll is the run's collection named suffix, through db: the control
// client's or a replica's.
func (t *target) coll(db *mongo.Database, suffix string) *mongo.Collection {
	return db.Collection(t.p.Prefix() + suffix)
}

// create makes a collection of the run, with its indexes. A collection that
// already exists is not the run's own: it is reported, never adopted.
func (t *target) create(ctx context.Context, suffix string, indexes ...mongo.IndexModel) error {
	name := t.p.Prefix() + suffix
	// Recorded for Cleanup before it is sent: a create cut short by Ctrl-C
	// may have run on the server. Only the server's refusal proves the
	// collection is not the run's.
	t.mu.Lock()
	t.created = append(t.created, name)
	t.mu.Unlock()
	if err := t.db.CreateCollection(ctx, name); err != nil {
		var ce mongo.CommandError
		if errors.As(err, &ce) {
			t.mu.Lock()
			t.created = slices.DeleteFunc(t.created, func(c string) bool { return c == name })
			t.mu.Unlock()
		}
		if errors.As(err, &ce) && ce.Code == 48 { // NamespaceExists
			return fmt.Errorf("mongo: collection %s.%s already exists and was not made by this run; use another run id", t.conn.database, name)
		}
		return fmt.Errorf("mongo: create collection %s.%s: %w", t.conn.database, name, scrub(err, t.conn.uri))
	}
	if len(indexes) > 0 {
		if _, err := t.db.Collection(name).Indexes().CreateMany(ctx, indexes); err != nil {
			return fmt.Errorf("mongo: create indexes on %s.%s: %w", t.conn.database, name, scrub(err, t.conn.uri))
		}
	}
	return nil
}

// Prepare creates the run's collections. When it fails it drops what it had
// made, since the runner calls Cleanup only after a successful Prepare.
func (t *target) Prepare(ctx context.Context) error {
	// Never cut short: a create or an insert abandoned mid-way may still be
	// applied by the server (FerretDB goes on) after the cleanup looked.
	// The control timeout bounds it; the run stops after.
	ctx = context.WithoutCancel(ctx)
	pctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	t.mu.Lock()
	if t.control == nil { // a target used again after Cleanup
		client, err := t.conn.connect(ctx, t.conn.options(0))
		if err != nil {
			t.mu.Unlock()
			return err
		}
		t.control, t.db = client, client.Database(t.conn.database)
	}
	rerr := runs.RegisterMongo(pctx, t.db, runs.New(t.p.RunID))
	var inUse *runs.InUseError
	// Without an answer the registration may have been written: Cleanup
	// removes it.
	t.registered = !errors.As(rerr, &inUse)
	t.mu.Unlock()
	err := rerr
	if err == nil {
		err = t.kind.prepare(pctx, t)
	}
	if err != nil {
		if cerr := t.Cleanup(context.WithoutCancel(ctx)); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return err
}

// Reset and Effects are never cut short, as Prepare is not: an insert (a
// coupon, an effect moved to the settled collection) that the client gave
// up on is still carried out by the server, and FerretDB would recreate a
// collection the cleanup had just dropped. The control timeout bounds them;
// the runner stops the run after them when its context has ended.
func (t *target) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	key := t.p.Prefix() + strconv.Itoa(burst)
	if t.kind.reset != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), controlTimeout)
		defer cancel()
		if err := t.kind.reset(ctx, t, key); err != nil {
			t.abandonedIf(ctx)
			return runner.Subject{}, t.lost(err)
		}
	}
	return runner.Subject{Burst: burst, Key: key}, nil
}

func (t *target) Effects(ctx context.Context, s runner.Subject) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), controlTimeout)
	defer cancel()
	n, err := t.kind.effects(ctx, t, s.Key)
	if err != nil {
		t.abandonedIf(ctx)
	}
	return n, t.lost(err)
}

// abandonedIf marks the run as having left an operation in flight when ctx
// ended before it was answered (see dropStragglers).
func (t *target) abandonedIf(ctx context.Context) {
	if ctx.Err() != nil {
		t.abandoned.Store(true)
	}
}

// lost says in one line that the server went away mid-run, when it did.
func (t *target) lost(err error) error {
	var sse topology.ServerSelectionError
	if err == nil || !errors.As(err, &sse) && !mongo.IsNetworkError(err) {
		return scrub(err, t.conn.uri)
	}
	return t.conn.unreachableError("mongo: lost the server mid-run: cannot reach", err)
}

// Cleanup drops exactly the collections Prepare made. It can be called again
// after a failure: what was dropped is forgotten, what was not is retried.
func (t *target) Cleanup(ctx context.Context) error {
	// Ctrl-C must not stop the dropping; a deadline of its own bounds it.
	ctx, cancel := scenarios.CleanupContext(ctx)
	defer cancel()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.control == nil {
		if len(t.created) == 0 && !t.registered {
			return nil
		}
		client, err := t.conn.connect(ctx, t.conn.options(0))
		if err != nil {
			return fmt.Errorf("%w; drop these collections by hand: %s", err, strings.Join(t.created, ", "))
		}
		t.control, t.db = client, client.Database(t.conn.database)
	}
	var left []string
	var failed error
	for i, name := range t.created {
		err := t.drop(ctx, name)
		if mongo.IsNetworkError(err) {
			// The driver empties the pool after a network error; a server
			// that restarted mid-run answers on a fresh connection.
			err = t.drop(ctx, name)
		}
		if err != nil {
			failed = err
			// One failure to reach the server says the rest would fail
			// too, each after the whole server selection timeout.
			if !unreachable(err) {
				left = append(left, name)
				continue
			}
			left = append(left, t.created[i:]...)
			break
		}
	}
	t.created = left
	if failed == nil && t.registered {
		// An attempt cancelled by Ctrl-C may have made a collection
		// after the drops above: MongoDB creates one on insert, and the
		// server finishes an operation its client gave up on. Everything
		// under the registered prefix is the run's own.
		failed = t.dropStragglers(ctx)
	}
	if failed == nil && t.registered {
		uctx, cancel := scenarios.CleanupContext(ctx)
		failed = runs.UnregisterMongo(uctx, t.db, t.p.RunID)
		cancel()
		t.registered = failed != nil
	}
	_ = disconnect(t.control)
	t.control, t.db = nil, nil
	if len(left) > 0 {
		return fmt.Errorf("mongo: could not drop %s in database %s (drop them by hand, or run 'racetest clean --run-id %s'): %w",
			strings.Join(left, ", "), t.conn.database, t.p.RunID, scrub(failed, t.conn.uri))
	}
	if failed != nil {
		return scrub(failed, t.conn.uri)
	}
	return nil
}

// stragglerLook is how often Cleanup looks for collections that operations
// a cancelled attempt left in flight made after the drops (FerretDB
// finishes an insert whose client is gone, through its backend, in
// milliseconds; more under load), and stragglerQuiet how long it must find
// none before it unregisters the run: a collection made after that would
// be a stranger's to 'racetest clean'.
const (
	stragglerLook  = 100 * time.Millisecond
	stragglerQuiet = time.Second
)

// dropStragglers drops the collections under the run's prefix that are
// still there. When no attempt was abandoned mid-operation or is still
// under way, every operation has returned and one look is enough; otherwise it looks until
// stragglerQuiet passes with none found, or ctx (the cleanup's deadline)
// ends.
func (t *target) dropStragglers(ctx context.Context) error {
	quietSince := time.Now()
	for {
		names, err := runs.CollectionsMongo(ctx, t.db, t.p.RunID)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := t.drop(ctx, n); err != nil {
				return err
			}
		}
		if len(names) > 0 {
			quietSince = time.Now()
		}
		settled := !t.abandoned.Load() && t.inFlight.Load() == 0
		if settled || time.Since(quietSince) >= stragglerQuiet {
			return nil
		}
		if err := scenarios.Sleep(ctx, stragglerLook); err != nil {
			return err
		}
	}
}

// unreachable reports an error that says the server cannot be reached at
// all, as opposed to one that refused a single command.
func unreachable(err error) bool {
	var sse topology.ServerSelectionError
	return errors.As(err, &sse) || mongo.IsNetworkError(err) || errors.Is(err, context.DeadlineExceeded)
}

func (t *target) drop(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	return t.db.Collection(name).Drop(ctx)
}

// Server names the server as buildInfo reports it.
func (t *target) Server() string { return t.server.String() }

// FerretDB reports whether the run's server is FerretDB.
func (t *target) FerretDB() bool { return t.server.FerretDB() }

func (t *target) note(s string) {
	t.mu.Lock()
	t.notes = append(t.notes, s)
	t.mu.Unlock()
}

func (t *target) Notes() []string {
	t.mu.Lock()
	notes := slices.Clone(t.notes)
	t.mu.Unlock()
	if t.server.FerretDB() {
		notes = append(notes, "mongo: the server is "+t.server.String()+", not MongoDB: its findAndModify and conditional updates "+
			"read, change and replace a document without re-checking the filter, so they are not atomic under concurrency")
	}
	if t.kind.name == scenarios.ConditionalUpdate {
		if r, e := t.redemptions.Load(), t.effectsSeen.Load(); r < e {
			notes = append(notes, fmt.Sprintf("mongo: the coupons' $inc redemptions counters sum to %d, but %d redemptions took effect: "+
				"the server lost %d concurrent $inc updates, so the effects are counted as documents, one per redemption", r, e, e-r))
		}
	}
	if t.conn.ownConnections() {
		notes = append(notes, "mongo: one client per worker with a single connection, opened and pinged before the first burst, "+
			"so that a wire release can hold each worker's own request")
	} else {
		notes = append(notes, "mongo: one client per replica with one pooled connection per worker, all opened before the first burst; "+
			"each attempt takes an idle one (the driver gives no connection of its own to a caller)")
	}
	return notes
}

// Open starts one replica: a client of its own whose pool holds one
// connection per worker, all opened before the first burst. With a dial hook
// (a wire release) each worker's session opens a client of its own instead
// (see app.Session): the driver hands a pooled connection to whichever
// caller comes, so a replica's shared pool cannot say which worker wrote a
// request.
func (t *target) Open(ctx context.Context, replica, workers int) (runner.App, error) {
	if t.conn.ownConnections() {
		// Each worker's client has its connection and its monitor's.
		if err := t.checkConnectionLimit(ctx, 2*workers); err != nil {
			return nil, err
		}
		return &app{t: t, replica: replica}, nil
	}
	if err := t.checkConnectionLimit(ctx, workers); err != nil {
		return nil, err
	}
	var open atomic.Int64
	o := t.conn.options(workers).SetPoolMonitor(&event.PoolMonitor{Event: func(e *event.PoolEvent) {
		switch e.Type {
		case event.ConnectionReady:
			open.Add(1)
		case event.ConnectionClosed:
			open.Add(-1)
		}
	}})
	client, err := t.conn.connect(ctx, o)
	if err != nil {
		return nil, err
	}
	a := &app{t: t, replica: replica, client: client, db: client.Database(t.conn.database)}
	if err := warm(ctx, client, workers, &open); err != nil {
		_ = disconnect(client)
		return nil, t.limitError(ctx, workers, scrub(err, t.conn.uri))
	}
	return a, nil
}

// warm fills the pool: workers goroutines ping together until the pool holds
// a connection for each, so that no attempt waits for a dial (the driver
// would otherwise open the missing ones two at a time, mid-burst).
func warm(ctx context.Context, client *mongo.Client, workers int, open *atomic.Int64) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout+2*time.Second)
	defer cancel()
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for open.Load() < int64(workers) {
				if err := client.Ping(ctx, readpref.Primary()); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("mongo: opened %d of %d connections: %w", open.Load(), workers, first)
	}
	return nil
}

// checkConnectionLimit refuses, in one line, a replica the server has no
// room for. MongoDB closes a connection over net.maxIncomingConnections
// without a reply, which the driver reports only as a network error.
func (t *target) checkConnectionLimit(ctx context.Context, workers int) error {
	avail, current, ok := t.connections(ctx)
	if ok && avail < int64(workers) {
		return fmt.Errorf("mongo: the server accepts only %d more connections (%d open; serverStatus connections.available) and this replica needs %d — run fewer attempts, or raise net.maxIncomingConnections",
			avail, current, workers)
	}
	return nil
}

// limitError turns a failed warm-up into the connection-limit line when the
// server is out of connections, and leaves any other error as it is.
func (t *target) limitError(ctx context.Context, workers int, err error) error {
	if !mongo.IsNetworkError(err) {
		return err
	}
	if avail, current, ok := t.connections(ctx); ok && avail < int64(workers) {
		return fmt.Errorf("mongo: the server refused connections: it accepts only %d more (%d open; serverStatus connections.available) and this replica needs %d — run fewer attempts, or raise net.maxIncomingConnections: %w",
			avail, current, workers, err)
	}
	return err
}

// connections reads serverStatus.connections; ok is false where the server
// does not report it (FerretDB) or the user may not run serverStatus.
func (t *target) connections(ctx context.Context) (available, current int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var doc struct {
		Connections *struct {
			Current   int64 `bson:"current"`
			Available int64 `bson:"available"`
		} `bson:"connections"`
	}
	cmd := bson.D{{Key: "serverStatus", Value: 1}}
	if err := t.control.Database("admin").RunCommand(ctx, cmd).Decode(&doc); err != nil || doc.Connections == nil {
		return 0, 0, false
	}
	return doc.Connections.Available, doc.Connections.Current, true
}

// app is one replica: its client and pool (nil when each worker has its
// own), and, for memory-set, its memory.
type app struct {
	t       *target
	replica int
	client  *mongo.Client
	db      *mongo.Database

	// memory is memory-set's processing set: this replica's own.
	memory scenarios.ReplicaMemory
}

// Session pings once more, so that a worker starts the burst on a pool that
// is known to answer. When each worker has a client of its own, Session
// opens it: its one connection is dialled and pinged here, inside the
// worker's claim window, so that the wire release knows it for the worker's.
func (a *app) Session(ctx context.Context, worker int) (runner.Session, error) {
	if a.client == nil {
		client, err := a.t.conn.connect(ctx, a.t.conn.workerOptions())
		if err != nil {
			return nil, err
		}
		return &session{a: a, t: a.t, db: client.Database(a.t.conn.database), own: client}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := a.client.Ping(pctx, readpref.Primary()); err != nil {
		return nil, fmt.Errorf("mongo: worker %d: ping: %w", worker, scrub(err, a.t.conn.uri))
	}
	return &session{a: a, t: a.t, db: a.db}, nil
}

func (a *app) Close() error {
	if a.client == nil {
		return nil
	}
	return disconnect(a.client)
}

// disconnect closes a client's connections. Disconnect first tells the
// server to end the client's sessions, a courtesy that waits for server
// selection when the server is gone: a second is enough for it.
func disconnect(c *mongo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), disconnectTimeout)
	defer cancel()
	return c.Disconnect(ctx)
}

// session is one worker's handle on its replica's pool, or on its own
// client.
type session struct {
	a   *app
	t   *target
	db  *mongo.Database
	own *mongo.Client // the worker's own client, nil on the replica's pool
}

func (s *session) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	s.t.inFlight.Add(1)
	defer s.t.inFlight.Add(-1)
	o := s.t.kind.attempt(ctx, s, subj, w)
	if ctx.Err() != nil {
		s.t.abandoned.Store(true)
	}
	return o
}

func (s *session) Close() error {
	if s.own == nil {
		return nil
	}
	return disconnect(s.own)
}

// count counts the documents of collection suffix that match filter.
func (t *target) count(ctx context.Context, suffix string, filter bson.D) (int, error) {
	n, err := t.coll(t.db, suffix).CountDocuments(ctx, filter)
	if err != nil {
		return 0, fmt.Errorf("mongo: count %s%s: %w", t.p.Prefix(), suffix, err)
	}
	return int(n), nil
}
