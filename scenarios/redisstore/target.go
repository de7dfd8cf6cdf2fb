package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
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

// kind is one scenario on Redis: its attempt and the scripts it runs.
type kind struct {
	scenario string
	attempt  func(ctx context.Context, s *session, k keys, w *runner.Worker) runner.Outcome
	scripts  []*redis.Script
}

var kinds = []kind{
	{scenario: scenarios.MemorySet, attempt: memorySet, scripts: []*redis.Script{pushScript}},
	{scenario: scenarios.CheckThenWrite, attempt: checkThenWrite, scripts: []*redis.Script{pushScript}},
	{scenario: scenarios.ConditionalUpdate, attempt: conditionalUpdate, scripts: []*redis.Script{redeemScript}},
	{scenario: scenarios.UniqueInsert, attempt: uniqueInsert, scripts: []*redis.Script{pushScript}},
	{scenario: scenarios.TTLLease, attempt: ttlLease, scripts: []*redis.Script{leaseScript}},
}

// keys are one burst's keys, all under the run's prefix.
type keys struct {
	// subject is what the attempts compete for: the coupon, the unique
	// row, the lease.
	subject string
	// effects is the list the guarded action appends to (for ttl-lease, the
	// record of each grant): its length, read after the burst, is the
	// ground truth.
	effects string
}

// burstKeys are burst's keys under prefix (see target.keyPrefix).
func burstKeys(prefix string, burst int) keys {
	b := prefix + "b" + strconv.Itoa(burst)
	return keys{subject: b + ":subject", effects: b + ":effects"}
}

func factory(k kind) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if p.Variant != "" {
			return nil, scenarios.BadParam(fmt.Errorf("redis: %s has no variant %q on Redis (it has none); drop --variant", k.scenario, p.Variant))
		}
		if p.TTL == 0 {
			p.TTL = scenarios.DefaultTTL
		}
		c, err := parseConn(p)
		if err != nil {
			return nil, err
		}
		admin, err := c.connect(ctx, 2)
		if err != nil {
			return nil, err
		}
		t := &target{kind: k, p: p, c: c, admin: admin, ttlMS: leaseMillis(p.TTL)}
		if cc, ok := admin.(*redis.ClusterClient); ok {
			if t.cluster, err = t.locate(ctx, cc); err != nil {
				admin.Close()
				return nil, err
			}
		}
		t.server = t.describeServer(ctx)
		return t, nil
	}
}

// locate finds, on a cluster, the primary that serves the run's hash slot:
// every session connects to it.
func (t *target) locate(ctx context.Context, cc *redis.ClusterClient) (*clusterInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	ci := &clusterInfo{}
	var err error
	if ci.primaries, err = primaries(ctx, cc); err == nil {
		ci.slot, err = slotOf(ctx, cc, t.p.RunID)
	}
	var node *redis.Client
	if err == nil {
		node, err = cc.MasterForKey(ctx, hashTag(t.p.RunID))
	}
	if err != nil {
		return nil, t.opError("find the primary that serves the run's hash slot (CLUSTER SLOTS, CLUSTER KEYSLOT)", err)
	}
	ci.node = node.Options().Addr
	t.c.node = ci.node
	return ci, nil
}

// target is one scenario on one Redis server for one run.
type target struct {
	kind   kind
	p      scenarios.Params
	c      *conn
	ttlMS  int64 // the lease length as Redis keeps it: whole milliseconds
	server string
	// cluster is set on a Redis Cluster: its primaries and the one that
	// serves the run.
	cluster *clusterInfo

	mu         sync.Mutex
	admin      redis.UniversalClient // racetest's own calls: reset, count, cleanup
	registered bool                  // the run's marker is written (see package runs)
	refreshed  time.Time             // when the marker's TTL was last renewed
}

// client returns the admin client, reopening it if Cleanup closed it, so that
// Cleanup stays callable more than once.
func (t *target) client() redis.UniversalClient {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.admin == nil {
		t.admin = t.c.admin(2)
	}
	return t.admin
}

// keyPrefix is what every key of the run begins with: the run's prefix, and
// on a cluster the run's hash tag, so that all of them are in one hash slot.
// They stay under the run's prefix, where cleanup and clean look for them.
func (t *target) keyPrefix() string {
	if t.cluster != nil {
		return t.p.Prefix() + hashTag(t.p.RunID)
	}
	return t.p.Prefix()
}

// nodeInfo reads an INFO section of the server the sessions use: the one
// server, or on a cluster the primary that serves the run.
func (t *target) nodeInfo(ctx context.Context, section string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if t.cluster == nil {
		return t.client().Info(cctx, section).Result()
	}
	cl := t.c.client(1, false)
	defer cl.Close()
	return cl.Info(cctx, section).Result()
}

func (t *target) describeServer(ctx context.Context) string {
	info, err := t.nodeInfo(ctx, "server")
	name := redisdb.ServerName(info)
	if err != nil {
		name = "Redis-compatible server (INFO refused: " + scrub(err.Error(), t.c.password) + ")"
	}
	if t.cluster != nil {
		name += ", " + t.cluster.describe()
	}
	return name
}

// Server names the server as it describes itself ("Redis 7.0.15").
func (t *target) Server() string { return t.server }

// Notes says what the report should know about this run on Redis.
func (t *target) Notes() []string {
	var notes []string
	if t.kind.scenario == scenarios.TTLLease && time.Duration(t.ttlMS)*time.Millisecond != t.p.TTL {
		notes = append(notes, fmt.Sprintf("redis: the lease TTL %s was rounded up to %d ms: Redis keeps expiry in whole milliseconds", t.p.TTL, t.ttlMS))
	}
	if t.cluster != nil {
		notes = append(notes, fmt.Sprintf("redis: on the Redis Cluster every key of this run carries the hash tag %s, so all are in hash slot %d, served by the primary %s; each worker keeps its own connection to it, as on one server",
			hashTag(t.p.RunID), t.cluster.slot, t.cluster.node))
	}
	if t.p.Isolation != "" || t.p.Engine != "" {
		notes = append(notes, "redis: --isolation and --engine do not apply to Redis and were ignored (each command, and each script, runs alone)")
	}
	return notes
}

// Prepare loads the scenario's scripts, so that each attempt's EVALSHA is
// found in the script cache and no hidden EVAL round trip enters the burst.
// Keys need no preparation: each burst makes its own.
func (t *target) Prepare(ctx context.Context) error {
	// Never cut short (see pgstore's Prepare): the run stops after it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	err := runs.RegisterRedis(ctx, t.client(), runs.New(t.p.RunID))
	var inUse *runs.InUseError
	t.mu.Lock()
	// Without an answer the marker may have been written: Cleanup removes it.
	t.registered, t.refreshed = !errors.As(err, &inUse), time.Now()
	t.mu.Unlock()
	if inUse != nil {
		return inUse
	}
	if err != nil {
		return t.prepareFailed(ctx, t.opError("register the run (SET NX "+runs.Marker(t.p.RunID)+")", err))
	}
	for _, s := range t.kind.scripts {
		if err := s.Load(ctx, t.client()).Err(); err != nil {
			return t.prepareFailed(ctx, t.opError("load the scenario's Lua script (SCRIPT LOAD)", err))
		}
	}
	return nil
}

// prepareFailed removes the registration of a Prepare that failed: the
// runner cleans up only after a successful one.
func (t *target) prepareFailed(ctx context.Context, err error) error {
	if cerr := t.Cleanup(ctx); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}

// refresh keeps a long run's marker alive, once a minute at most.
func (t *target) refresh(ctx context.Context) {
	t.mu.Lock()
	due := t.registered && time.Since(t.refreshed) > time.Minute
	if due {
		t.refreshed = time.Now()
	}
	t.mu.Unlock()
	if due {
		_ = runs.RefreshRedis(ctx, t.client(), t.p.RunID)
	}
}

// Reset makes burst's subject. Only conditional-update needs one in place:
// the coupon exists, issued, before the attempts race to redeem it.
func (t *target) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	k := burstKeys(t.keyPrefix(), burst)
	s := runner.Subject{Burst: burst, Key: k.subject, Data: k}
	t.refresh(ctx)
	if t.kind.scenario == scenarios.ConditionalUpdate {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		if err := t.client().Set(ctx, k.subject, "issued", runs.KeyTTL).Err(); err != nil {
			return s, t.opError("issue the coupon (SET)", err)
		}
	}
	return s, nil
}

// Effects counts what the guarded action wrote, in Redis, after the burst.
func (t *target) Effects(ctx context.Context, s runner.Subject) (int, error) {
	k := s.Data.(keys)
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if t.kind.scenario == scenarios.TTLLease {
		recs, err := t.client().LRange(ctx, k.effects, 0, -1).Result()
		if err != nil {
			return 0, t.opError("read the lease grants (LRANGE)", err)
		}
		gs, err := parseGrants(recs)
		if err != nil {
			return 0, err
		}
		return mostAtOnce(gs), nil
	}
	n, err := t.client().LLen(ctx, k.effects).Result()
	if err != nil {
		return 0, t.opError("count the effects (LLEN)", err)
	}
	return int(n), nil
}

// Cleanup deletes every key under the run's prefix, and only those, then
// the run's marker, and closes the admin client. A run that never
// registered made no key, and deletes none: the keys under its prefix are
// someone else's.
func (t *target) Cleanup(ctx context.Context) error {
	cl := t.client()
	t.mu.Lock()
	registered := t.registered
	t.mu.Unlock()
	var err error
	if registered {
		cctx, cancel := scenarios.CleanupContext(ctx)
		// A paused server that answers before the deadline still gets
		// its keys deleted (see scenarios.NoAnswer).
		_, err = scenarios.RetryNoAnswer(cctx, func(ctx context.Context) (int, error) { return runs.DropRedis(ctx, cl, t.p.RunID) })
		cancel()
	}
	t.mu.Lock()
	t.admin = nil
	t.registered = registered && err != nil
	t.mu.Unlock()
	cl.Close()
	if err != nil {
		if t.cluster != nil {
			return fmt.Errorf("redis: could not delete this run's keys %s* on the Redis Cluster %s: %s — delete them by hand on each primary (%s): redis-cli -h HOST -p PORT --scan --pattern '%s*' | xargs redis-cli -c -h HOST -p PORT del, or run 'racetest clean --run-id %s'",
				t.p.Prefix(), t.c.addr, describeErr(err, t.c.password), formatAddrs(t.cluster.primaries), redisdb.GlobEscape(t.p.Prefix()), t.p.RunID)
		}
		cli := "redis-cli " + t.c.cliArgs()
		return fmt.Errorf("redis: could not delete this run's keys %s* on %s: %s — delete them by hand: %s --scan --pattern '%s*' | xargs %s del",
			t.p.Prefix(), t.c.addr, describeErr(err, t.c.password), cli, redisdb.GlobEscape(t.p.Prefix()), cli)
	}
	return nil
}

// opError words a failed call of racetest's own (not an attempt's).
func (t *target) opError(what string, err error) error {
	return &wrapped{
		msg: fmt.Sprintf("redis: could not %s on %s: %s", what, t.c.addr, describeErr(err, t.c.password)),
		err: err,
	}
}

// Open starts one replica: its own pool, sized to its workers, and its own
// memory (the processing set of memory-set).
func (t *target) Open(_ context.Context, replica, workers int) (runner.App, error) {
	return &app{t: t, replica: replica, client: t.c.client(max(workers, 1), true)}, nil
}

// app is one replica of the application.
type app struct {
	t       *target
	replica int
	client  *redis.Client

	// memory is memory-set's processing set: this replica's own.
	memory scenarios.ReplicaMemory
}

// Session gives worker its own connection, dialled and pinged now so that
// connection setup never serialises the attempts.
func (a *app) Session(ctx context.Context, worker int) (runner.Session, error) {
	cn := a.client.Conn()
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := cn.Ping(pctx).Err(); err != nil {
		cn.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if isTooManyClients(err) || a.t.nearClientLimit(ctx) {
			return nil, a.t.tooManyClients(ctx, err)
		}
		return nil, a.t.c.connectError(err)
	}
	return &session{app: a, cn: cn, owner: fmt.Sprintf("r%d-w%d", a.replica, worker)}, nil
}

// nearClientLimit reports whether the server is at its maxclients limit:
// Redis answers a connection over the limit with an error and closes it, and
// the driver may see only the close.
func (t *target) nearClientLimit(ctx context.Context) bool {
	connected, limit := t.clientCounts(ctx)
	return limit > 0 && connected+1 >= limit
}

func (t *target) clientCounts(ctx context.Context) (connected, limit int) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	info, err := t.nodeInfo(cctx, "clients")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "connected_clients":
			connected, _ = strconv.Atoi(v)
		case "maxclients":
			limit, _ = strconv.Atoi(v)
		}
	}
	return connected, limit
}

func (t *target) tooManyClients(ctx context.Context, err error) error {
	_, limit := t.clientCounts(ctx)
	lim := "its maxclients limit"
	if limit > 0 {
		lim = fmt.Sprintf("its maxclients limit of %d", limit)
	}
	return &wrapped{
		msg: fmt.Sprintf("redis: %s refused a connection: %s reached — run fewer attempts (--attempts %d asks for one connection each), or raise maxclients on the server",
			t.c.server(), lim, t.p.Attempts),
		err: err,
	}
}

func (a *app) Close() error { return a.client.Close() }

// session is one worker's dedicated connection.
type session struct {
	app   *app
	cn    *redis.Conn
	owner string // names the worker in what it writes
}

func (s *session) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	return s.app.t.kind.attempt(ctx, s, subj.Data.(keys), w)
}

func (s *session) Close() error { return s.cn.Close() }

// wrapped keeps the driver's error for errors.Is and errors.As while its
// message says what failed in words that stay the same from one connection
// to the next (so the report can count them) and never hold a password.
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// describeErr words a driver error without the connection's local port,
// which differs on every connection.
func describeErr(err error, password string) string {
	var re redis.Error
	switch {
	case errors.As(err, &re):
		return scrub(re.Error(), password)
	case isTimeout(err):
		return "no reply in time"
	case errors.Is(err, redis.ErrClosed):
		return "connection closed"
	}
	msg := err.Error()
	// "read tcp 127.0.0.1:50312->127.0.0.1:6379: read: connection reset by peer"
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg[:i], "->") {
		msg = msg[i+2:]
	}
	return scrub(msg, password)
}
