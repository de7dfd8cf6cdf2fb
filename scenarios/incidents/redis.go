package incidents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/racetest/racetest/scenarios/runs"
)

// redisConnectTimeout bounds dialling and the first PING of racetest's own
// connections: an unreachable server is reported in seconds.
const redisConnectTimeout = redisdb.ConnectTimeout

// redisServer is where and how a run reaches Redis.
type redisServer struct {
	opt      *redis.Options // template: the URL's settings and ours
	redacted string
}

func parseRedis(p scenarios.Params) (*redisServer, error) {
	raw := redisdb.RunURL(p.Conn.Get(redisstore.Name))
	if redisstore.IsClusterURL(raw) {
		return nil, redisstore.ClusterRefusal(incidentsOnRedis)
	}
	// The attempt's deadline bounds each call, so a claim against a hung
	// server gives up at the 1.5 s the fix allows, not at the driver's 5 s
	// read timeout; and a SET NX is never retried after a timeout.
	opt, err := redisdb.RunOptions(raw, p.Dial)
	if err != nil {
		return nil, err
	}
	return &redisServer{opt: opt, redacted: redisdb.Redact(raw)}, nil
}

// client opens a pool of poolSize connections to addr ("" means the URL's).
func (r *redisServer) client(addr string, poolSize int) *redis.Client {
	opt := *r.opt
	if addr != "" {
		opt.Addr = addr
	}
	opt.PoolSize = max(poolSize, 1)
	opt.MaxIdleConns = opt.PoolSize
	return redis.NewClient(&opt)
}

// incidentsOnRedis names, in the refusal of a Redis Cluster, what refuses it.
const incidentsOnRedis = "this incident scenario"

// connect opens racetest's own client and proves the server answers, and is
// one server: on a Redis Cluster node most keys would meet MOVED errors.
func (r *redisServer) connect(ctx context.Context) (*redis.Client, error) {
	cl := r.client("", 2)
	if err := redisdb.Ping(ctx, cl); err != nil {
		cl.Close()
		return nil, fmt.Errorf("redis: cannot reach %s: %w — is the server running? set --redis-url or RACETEST_REDIS_URL", r.redacted, err)
	}
	if err := redisstore.RefuseCluster(ctx, "", cl, incidentsOnRedis); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// describe names the server: "Redis 7.2.4".
func describeRedis(ctx context.Context, cl *redis.Client) string {
	ictx, cancel := context.WithTimeout(ctx, redisConnectTimeout)
	defer cancel()
	info, err := cl.Info(ictx, "server").Result()
	if err != nil {
		return "Redis"
	}
	return redisdb.ServerName(info)
}

// keyTTL is how long every key the incidents write lives (runs.KeyTTL), in
// the milliseconds the scripts take.
var keyTTL = runs.KeyTTL.Milliseconds()

// redisRegistration is a run's marker on Redis (see package runs): written
// before the run writes a key, and the only licence to delete keys under
// the run's prefix. While the run goes on, its TTL is renewed every
// markerRefresh, so that a run longer than the marker's TTL stays
// registered (and 'racetest clean' still knows its keys).
type redisRegistration struct {
	mu         sync.Mutex
	registered bool
	stop       chan struct{} // closed to end the renewal; nil when none runs
}

// markerRefreshNs is how often a registered run renews its marker, in
// nanoseconds; atomic, since a test shortens it while renewals of runs
// from earlier tests may still be reading it.
var markerRefreshNs atomic.Int64

func init() { markerRefreshNs.Store(int64(time.Minute)) }

// markerRefresh is how often a registered run renews its marker.
func markerRefresh() time.Duration { return time.Duration(markerRefreshNs.Load()) }

func (g *redisRegistration) register(ctx context.Context, cl *redis.Client, runID, where string) error {
	cctx, cancel := context.WithTimeout(ctx, redisConnectTimeout)
	defer cancel()
	err := runs.RegisterRedis(cctx, cl, runs.New(runID))
	var inUse *runs.InUseError
	g.mu.Lock()
	// Without an answer the marker may have been written: drop removes it.
	g.registered = !errors.As(err, &inUse)
	if err == nil && g.stop == nil {
		g.stop = make(chan struct{})
		go renew(cl, runID, g.stop)
	}
	g.mu.Unlock()
	if err != nil && inUse == nil {
		err = fmt.Errorf("%w (on %s)", err, where)
	}
	return err
}

// renew renews run id's marker every markerRefresh until stop is closed.
// PEXPIRE never recreates a marker that is gone (dropped, or cleaned).
func renew(cl *redis.Client, runID string, stop <-chan struct{}) {
	t := time.NewTicker(markerRefresh())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), redisConnectTimeout)
			_ = runs.RefreshRedis(ctx, cl, runID)
			cancel()
		}
	}
}

// stopRenewal ends the marker's renewal; g.mu is held.
func (g *redisRegistration) stopRenewal() {
	if g.stop != nil {
		close(g.stop)
		g.stop = nil
	}
}

// close ends the renewal of a run that keeps its keys (--keep), before its
// client closes.
func (g *redisRegistration) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopRenewal()
}

// drop deletes the run's keys and its marker, under a deadline of its own
// whatever ctx says; a run that never registered wrote nothing, and
// deletes nothing.
func (g *redisRegistration) drop(ctx context.Context, cl *redis.Client, runID, where string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopRenewal()
	if !g.registered {
		return nil
	}
	cctx, cancel := scenarios.CleanupContext(ctx)
	defer cancel()
	drop := func(ctx context.Context) (int, error) { return runs.DropRedis(ctx, cl, runID) }
	if _, err := scenarios.RetryNoAnswer(cctx, drop); err != nil {
		return fmt.Errorf("redis: could not delete the run's keys %s* on %s: %w — run 'racetest clean --run-id %s'", runs.Prefix(runID), where, err, runID)
	}
	g.registered = false
	return nil
}

// ---- a server that is down, and one that hangs ----

// deadAddr returns a local address nothing listens on: a port just freed.
func deadAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("could not find a free local port to play the dead server: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// hangServer accepts connections and never answers: a server stuck in a
// long command, a full disk, a half-dead VM.
type hangServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  sync.WaitGroup
}

func startHang() (*hangServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("could not start the local server that never answers: %w", err)
	}
	h := &hangServer{ln: ln}
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	return h, nil
}

func (h *hangServer) Addr() string { return h.ln.Addr().String() }

func (h *hangServer) Close() {
	h.ln.Close()
	h.done.Wait()
	h.mu.Lock()
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
	h.mu.Unlock()
}

// ---- claims (alert-dedupe, job-window) ----

type redisClaims struct {
	reg   redisRegistration
	p     scenarios.Params
	srv   *redisServer
	mode  storeMode
	admin *redis.Client // the real server (store up only)
	addr  string        // where the replicas connect
	hang  *hangServer
	name  string
}

func redisClaimsBackend(ctx context.Context, p scenarios.Params, mode storeMode) (claimsBackend, error) {
	srv, err := parseRedis(p)
	if err != nil {
		return nil, err
	}
	c := &redisClaims{p: p, srv: srv, mode: mode}
	switch mode {
	case storeUp:
		if c.admin, err = srv.connect(ctx); err != nil {
			return nil, err
		}
		c.name = describeRedis(ctx, c.admin)
	case storeDown:
		if c.addr, err = deadAddr(); err != nil {
			return nil, err
		}
		c.name = "none (a dead port, " + c.addr + ")"
	case storeHung:
		if c.hang, err = startHang(); err != nil {
			return nil, err
		}
		c.addr = c.hang.Addr()
		c.name = "none (a listener that never answers, " + c.addr + ")"
	}
	return c, nil
}

func (c *redisClaims) Prepare(ctx context.Context) error {
	if c.admin == nil {
		return nil // the store is down or hung on purpose: nothing is written
	}
	return c.reg.register(ctx, c.admin, c.p.RunID, c.srv.redacted)
}

func (c *redisClaims) Cleanup(ctx context.Context) error {
	if c.admin == nil {
		return nil
	}
	return c.reg.drop(ctx, c.admin, c.p.RunID, c.srv.redacted)
}

func (c *redisClaims) Close() error {
	c.reg.close()
	if c.hang != nil {
		c.hang.Close()
	}
	if c.admin != nil {
		return c.admin.Close()
	}
	return nil
}

func (c *redisClaims) Server() string { return c.name }

func (c *redisClaims) Where() string {
	switch c.mode {
	case storeDown:
		return "Redis at a dead port (" + c.addr + ")"
	case storeHung:
		return "a Redis address that accepts and never answers (" + c.addr + ")"
	}
	return "Redis at " + c.srv.opt.Addr
}

func (c *redisClaims) Open(_ context.Context, workers int) (claimPool, error) {
	return &redisClaimPool{c: c, client: c.srv.client(c.addr, workers)}, nil
}

func (c *redisClaims) Hung(context.Context) (claimConn, func(), error) {
	h, err := startHang()
	if err != nil {
		return nil, nil, err
	}
	cl := c.srv.client(h.Addr(), 1)
	return &redisClaimConn{cmd: cl}, func() { cl.Close(); h.Close() }, nil
}

type redisClaimPool struct {
	c      *redisClaims
	client *redis.Client
}

// Conn pins one connection for a worker when the store is up, pinged now
// so that dialling never serialises the attempts. When the store is down or
// hung, calls go through the replica's pool as the incident's did: every
// call takes a fresh connection and meets the dead port or the silence
// again (a pinned connection, once timed out, would fail at once instead).
func (p *redisClaimPool) Conn(ctx context.Context) (claimConn, error) {
	if p.c.mode != storeUp {
		return &redisClaimConn{cmd: unclosable{p.client}}, nil
	}
	cn := p.client.Conn()
	if err := redisdb.Ping(ctx, cn); err != nil {
		cn.Close()
		return nil, fmt.Errorf("redis: a replica could not connect to %s: %w", p.c.srv.redacted, err)
	}
	return &redisClaimConn{cmd: cn}, nil
}

// unclosable shares the replica's pool between sessions: the pool closes
// with the replica, not with a session.
type unclosable struct{ *redis.Client }

func (unclosable) Close() error { return nil }

func (p *redisClaimPool) Close() error { return p.client.Close() }

type redisClaimConn struct {
	cmd interface {
		SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
		Close() error
	}
}

// Claim is SET key 1 NX PX ttl: set if absent, with its expiry, atomically.
func (c *redisClaimConn) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	ok, err := c.cmd.SetNX(ctx, key, "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("redis: SET NX %s: %w", key, err)
	}
	return ok, nil
}

func (c *redisClaimConn) Close() error { return c.cmd.Close() }

// ---- leases (lease-pause) ----

// acquireScript grants the lease if it is free or expired (SET NX PX) and
// returns the grant's fencing token, or 0.
var acquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local token = redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return token
end
return 0`)

// writeScript writes the resource; fenced (ARGV[2] = '1'), it refuses a
// token lower than the highest it has seen — the store checks, not the
// writer.
var writeScript = redis.NewScript(`
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
local token = tonumber(ARGV[1])
if ARGV[2] == '1' and token < last then return 0 end
redis.call('HINCRBY', KEYS[1], 'writes', 1)
if token > last then redis.call('HSET', KEYS[1], 'last', token) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)

// checkScript reads whether the resource was written; fenced (ARGV[2] =
// '1'), it first raises the highest token seen, so that no lower token can
// write after this check.
var checkScript = redis.NewScript(`
if ARGV[2] == '1' then
  local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
  if tonumber(ARGV[1]) > last then redis.call('HSET', KEYS[1], 'last', ARGV[1]) end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return tonumber(redis.call('HGET', KEYS[1], 'writes') or '0')`)

// compareAndDeleteScript deletes the lease only if owner still holds it.
var compareAndDeleteScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

type redisLeases struct {
	reg   redisRegistration
	p     scenarios.Params
	srv   *redisServer
	admin *redis.Client
	name  string
}

func redisLeaseBackend(ctx context.Context, p scenarios.Params) (leaseBackend, error) {
	srv, err := parseRedis(p)
	if err != nil {
		return nil, err
	}
	admin, err := srv.connect(ctx)
	if err != nil {
		return nil, err
	}
	return &redisLeases{p: p, srv: srv, admin: admin, name: describeRedis(ctx, admin)}, nil
}

func leaseKeys(key string) (lease, fence, resource string) {
	return key, key + ":fence", key + ":resource"
}

func (r *redisLeases) Prepare(ctx context.Context) error {
	if err := r.reg.register(ctx, r.admin, r.p.RunID, r.srv.redacted); err != nil {
		return err
	}
	for _, s := range []*redis.Script{acquireScript, checkScript, writeScript, compareAndDeleteScript} {
		if err := s.Load(ctx, r.admin).Err(); err != nil {
			return fmt.Errorf("redis: could not load the lease scripts on %s: %w", r.srv.redacted, err)
		}
	}
	return nil
}

func (r *redisLeases) Reset(ctx context.Context, key string) error {
	l, f, res := leaseKeys(key)
	return r.admin.Del(ctx, l, f, res).Err()
}

func (r *redisLeases) Writes(ctx context.Context, key string) (int, error) {
	_, _, res := leaseKeys(key)
	n, err := r.admin.HGet(ctx, res, "writes").Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

func (r *redisLeases) Cleanup(ctx context.Context) error {
	return r.reg.drop(ctx, r.admin, r.p.RunID, r.srv.redacted)
}

func (r *redisLeases) Close() error {
	r.reg.close()
	return r.admin.Close()
}
func (r *redisLeases) Server() string { return r.name }

func (r *redisLeases) Open(_ context.Context, workers int) (leasePool, error) {
	return &redisLeasePool{r: r, client: r.srv.client("", workers)}, nil
}

type redisLeasePool struct {
	r      *redisLeases
	client *redis.Client
}

func (p *redisLeasePool) Conn(ctx context.Context) (leaseConn, error) {
	cn := p.client.Conn()
	if err := redisdb.Ping(ctx, cn); err != nil {
		cn.Close()
		return nil, fmt.Errorf("redis: a replica could not connect to %s: %w", p.r.srv.redacted, err)
	}
	return &redisLeaseConn{cn: cn}, nil
}

func (p *redisLeasePool) Close() error { return p.client.Close() }

type redisLeaseConn struct{ cn *redis.Conn }

func (c *redisLeaseConn) Close() error { return c.cn.Close() }

func (c *redisLeaseConn) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (bool, int64, error) {
	l, f, _ := leaseKeys(key)
	token, err := acquireScript.Run(ctx, c.cn, []string{l, f}, owner, max(ttl.Milliseconds(), 1), keyTTL).Int64()
	if err != nil {
		return false, 0, err
	}
	return token > 0, token, nil
}

func (c *redisLeaseConn) Done(ctx context.Context, key string, token int64, fenced bool) (bool, error) {
	_, _, res := leaseKeys(key)
	n, err := checkScript.Run(ctx, c.cn, []string{res}, token, boolArg(fenced), keyTTL).Int()
	return n > 0, err
}

func (c *redisLeaseConn) Write(ctx context.Context, key, _ string, token int64, fenced bool) (bool, error) {
	_, _, res := leaseKeys(key)
	n, err := writeScript.Run(ctx, c.cn, []string{res}, token, boolArg(fenced), keyTTL).Int()
	return n == 1, err
}

func (c *redisLeaseConn) Release(ctx context.Context, key, owner string, compare bool) (bool, error) {
	l, _, _ := leaseKeys(key)
	if compare {
		n, err := compareAndDeleteScript.Run(ctx, c.cn, []string{l}, owner).Int()
		return n == 1, err
	}
	n, err := c.cn.Del(ctx, l).Result()
	return n == 1, err
}

// boolArg is a flag as a script argument.
func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
