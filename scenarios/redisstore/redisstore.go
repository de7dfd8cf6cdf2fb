package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/scenarios"
)

// Name is the backend's name on the command line.
const Name = "redis"

// ReadKey is the key of the backend's replica in scenarios.Connections and
// in a suite's connections:.
const ReadKey = Name + scenarios.ReadSuffix

// Timeouts of racetest's own calls. The attempts themselves are bounded by
// the runner's per-attempt context, which the client honours because
// ContextTimeoutEnabled is set.
const (
	// connectTimeout bounds dialling, the handshake and the first PING: an
	// unreachable server must be reported within seconds, not after the
	// driver's retries.
	connectTimeout = 3 * time.Second
	// opTimeout bounds each of racetest's own calls (reset, count, cleanup)
	// so that a server that stops answering ends the run instead of hanging it.
	opTimeout = 5 * time.Second
)

const flagHint = "set --redis-url or RACETEST_REDIS_URL"

// Backend is the Redis backend as the registry knows it: its connection
// and the knobs it accepts.
var Backend = scenarios.Backend{
	Name:    Name,
	Summary: "Redis (or a compatible server such as Valkey) via go-redis v9; --redis-url, default " + redisdb.DefaultURL,
	Server:  true,
	Conn: &scenarios.Connection{
		Flag: "redis-url", Env: "RACETEST_REDIS_URL", Default: redisdb.DefaultURL, What: "Redis URL (a Redis Cluster too, for the five built-in scenarios: redis://host:port?addr=host2:port2, or any node's URL)", Redact: redisdb.Redact,
		Key:   Name,
		Probe: probe,
	},
	ReadConn: &scenarios.Connection{
		Flag: "redis-read-url", Env: "RACETEST_REDIS_READ_URL",
		What: "a replica of --redis-url, for failover-lock (scripts/cluster.sh start redis-replica prints one)", Redact: redisdb.Redact,
		Key:     ReadKey,
		Cluster: "redis-replica", Probe: probe,
	},
	Releases: []string{"last-byte"},
	Kept:     "keys",
	Janitor:  Janitor,
}

// probe connects to the server url names, without a handshake.
func probe(ctx context.Context, url string) error {
	if url == "" {
		url = redisdb.DefaultURL
	}
	if seeds, ok := seedsOf(url); ok {
		return scenarios.ProbeAddr(ctx, "tcp", seeds[0]) // a cluster: one seed answering is enough
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return scenarios.BadParam(fmt.Errorf("redis: cannot parse %s: %w", redisdb.Redact(url), err))
	}
	return scenarios.ProbeAddr(ctx, opt.Network, opt.Addr)
}

// Register adds the Redis backend and its scenarios to r.
func Register(r *scenarios.Registry) {
	r.AddBackend(Backend)
	for _, k := range kinds {
		r.Register(k.scenario, Name, factory(k))
	}
}

// conn is where and how a run reaches the server.
type conn struct {
	raw      string // as given, with the password: never printed
	password string
	addr     string // for messages: the server, or a cluster's seeds
	dial     scenarios.DialFunc

	// cluster is set when the URL names a Redis Cluster, by its seeds or by
	// one node that says it is one (see connect).
	cluster *redis.ClusterOptions
	// node is, on a cluster, the primary that serves the run's hash slot:
	// the server of every session, as the one server is without a cluster.
	node string
}

// parseConn reads the run's URL (or the default).
func parseConn(p scenarios.Params) (*conn, error) {
	raw := p.Conn.Get(Name)
	if raw == "" {
		raw = redisdb.DefaultURL
	}
	pw := ""
	if u, uerr := url.Parse(raw); uerr == nil {
		pw, _ = u.User.Password()
	}
	if seeds, ok := seedsOf(raw); ok {
		co, err := parseClusterURL(raw)
		if err != nil {
			return nil, scenarios.BadParam(fmt.Errorf("redis: cannot use the cluster URL %s: %s — %s to a URL like redis://host1:port1?addr=host2:port2&addr=host3:port3 (the addresses of some of the cluster's nodes)",
				redisdb.Redact(raw), scrub(strings.ReplaceAll(err.Error(), raw, redisdb.Redact(raw)), pw), flagHint))
		}
		return &conn{raw: raw, password: co.Password, addr: strings.Join(seeds, ","), dial: p.Dial, cluster: co}, nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		// url.Error repeats the URL as given, password included: keep only
		// the scrubbed text, never the error value itself.
		return nil, scenarios.BadParam(fmt.Errorf("redis: cannot use the URL %s: %s — %s to a URL like %s",
			redisdb.Redact(raw), scrub(strings.ReplaceAll(err.Error(), raw, redisdb.Redact(raw)), pw), flagHint, redisdb.DefaultURL))
	}
	return &conn{raw: raw, password: opt.Password, addr: opt.Addr, dial: p.Dial}, nil
}

// options returns the client options of one pool of size poolSize; a warm
// pool dials its connections at once rather than on first use. On a
// cluster, the pool is to the primary that serves the run (c.node).
func (c *conn) options(poolSize int, warm bool) *redis.Options {
	var opt *redis.Options
	if c.cluster != nil {
		opt = nodeOptions(c.cluster, c.node)
	} else {
		var err error
		if opt, err = redis.ParseURL(c.raw); err != nil {
			panic("redisstore: URL parsed once and not twice: " + err.Error())
		}
	}
	if opt.DialTimeout == 0 {
		opt.DialTimeout = connectTimeout
	}
	redisdb.ForRun(opt, c.dial)
	opt.PoolSize = poolSize
	opt.MaxIdleConns = poolSize
	if warm {
		opt.MinIdleConns = poolSize
	}
	return opt
}

// clusterOptions are the cluster client's options: racetest's own calls
// (reset, count, cleanup, the marker) go through it, to whichever primary
// serves each key, with the same bounds as options gives a node's pool.
func (c *conn) clusterOptions(poolSize int) *redis.ClusterOptions {
	co := *c.cluster
	node := c.options(poolSize, false)
	co.ContextTimeoutEnabled = true
	co.DialTimeout, co.DialerRetries, co.MaxRetries = node.DialTimeout, node.DialerRetries, node.MaxRetries
	co.PoolSize, co.MaxIdleConns = poolSize, poolSize
	co.DisableIdentity = true
	co.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	co.Dialer = node.Dialer
	return &co
}

// server names the server the sessions use: the one server, or on a
// cluster the primary that serves the run.
func (c *conn) server() string {
	if c.node != "" {
		return c.node
	}
	return c.addr
}

// client opens a pool of size poolSize (on a cluster, to c.node).
func (c *conn) client(poolSize int, warm bool) *redis.Client {
	return redis.NewClient(c.options(poolSize, warm))
}

// admin opens the client of racetest's own calls: the cluster client on a
// cluster, else a pool to the one server.
func (c *conn) admin(poolSize int) redis.UniversalClient {
	if c.cluster != nil {
		return redis.NewClusterClient(c.clusterOptions(poolSize))
	}
	return c.client(poolSize, false)
}

// cliArgs are redis-cli's arguments for the same server and database, without
// the password, for the commands an error suggests.
func (c *conn) cliArgs() string {
	opt := c.options(1, false)
	args := "-s " + opt.Addr
	if opt.Network != "unix" {
		host, port, err := net.SplitHostPort(opt.Addr)
		if err != nil {
			return ""
		}
		args = fmt.Sprintf("-h %s -p %s", host, port)
	}
	if opt.DB != 0 {
		args += fmt.Sprintf(" -n %d", opt.DB)
	}
	if opt.TLSConfig != nil {
		args += " --tls"
	}
	return args
}

// connect opens racetest's own client (see admin) and proves the server
// answers, within connectTimeout. A plain URL whose server turns out to be a
// Redis Cluster node becomes a cluster URL with that node as its seed: a
// plain client would meet MOVED errors for most keys.
func (c *conn) connect(ctx context.Context, poolSize int) (redis.UniversalClient, error) {
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if c.cluster == nil {
		cl := c.client(poolSize, false)
		err := cl.Ping(pctx).Err()
		if err == nil && !clusterEnabled(pctx, cl) {
			return cl, nil
		}
		cl.Close()
		if err != nil && strings.Contains(err.Error(), "SELECT is not allowed in cluster mode") {
			return nil, scenarios.BadParam(fmt.Errorf("redis: %s is a Redis Cluster node, and a Redis Cluster has database 0 only — %s to a URL like redis://%s/0", c.addr, flagHint, c.addr))
		}
		if err != nil {
			return nil, c.failedConnect(ctx, err)
		}
		opt, _ := redis.ParseURL(c.raw)
		co, err := clusterFromNode(opt)
		if err != nil {
			return nil, scenarios.BadParam(fmt.Errorf("redis: %s is a Redis Cluster node, and the URL %s cannot be used for the cluster: %s — %s to a URL like redis://%s/0",
				c.addr, redisdb.Redact(c.raw), err, flagHint, c.addr))
		}
		c.cluster = co
	}
	cc := redis.NewClusterClient(c.clusterOptions(poolSize))
	// Every primary must answer: cleanup and clean visit them all.
	err := cc.ForEachMaster(pctx, func(ctx context.Context, n *redis.Client) error {
		if err := n.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("primary %s: %w", n.Options().Addr, err)
		}
		return nil
	})
	if err != nil {
		cc.Close()
		return nil, c.failedConnect(ctx, err)
	}
	return cc, nil
}

// failedConnect is connect's error: the caller's own cancellation, or why
// the server could not be reached.
func (c *conn) failedConnect(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return c.connectError(err)
}

// connectError says, in one line, why the server could not be reached and
// what to do about it.
func (c *conn) connectError(err error) error {
	why, hint := "", "is the server running? "+flagHint
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.As(err, &dnsErr):
		why, hint = "host not found", "check the host in the URL; "+flagHint
	case isTimeout(err):
		why, hint = fmt.Sprintf("no answer within %s", connectTimeout),
			"is the address right, and does the server answer Redis on it? "+flagHint
	case isTooManyClients(err):
		why, hint = "max number of clients reached", "the server is at its maxclients limit: close other clients or raise maxclients"
	case strings.Contains(err.Error(), "cluster support disabled"):
		why, hint = "a server there is not a Redis Cluster node", "give the addresses of a cluster's nodes, or one server's URL (redis://host:port/0); "+flagHint
	case isAuthError(err):
		why, hint = "authentication failed", "check the user and password; "+flagHint
	default:
		why = describeErr(err, c.password)
	}
	return &wrapped{msg: fmt.Sprintf("redis: cannot connect to %s (%s) — %s", c.addr, why, hint), err: err}
}

func isAuthError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "ERR invalid password", "ERR AUTH", "ERR Client sent AUTH"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// isTooManyClients matches the error Redis sends to a connection over its
// maxclients limit before it closes it.
func isTooManyClients(err error) bool {
	return err != nil && strings.Contains(err.Error(), "max number of clients reached")
}

// scrub removes secrets from a message that may quote them.
func scrub(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}
