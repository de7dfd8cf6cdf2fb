package script

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// rdStore runs scripts on Redis: each command is sent as written, with
// go-redis's Do.
type rdStore struct {
	url    string
	opt    *redis.Options
	admin  *rdConn
	server string
}

const redisHint = "set --redis-url or RACETEST_REDIS_URL"

// scriptsOnRedis names, in the refusal of a Redis Cluster, what refuses it.
const scriptsOnRedis = "a script (racetest redis)"

// OpenRedis connects racetest's own connection to p.Conn.Get(redisstore.Name).
func OpenRedis(ctx context.Context, p scenarios.Params) (Store, error) {
	raw := p.Conn.Get(redisstore.Name)
	if raw == "" {
		raw = redisdb.DefaultURL
	}
	if redisstore.IsClusterURL(raw) {
		return nil, redisstore.ClusterRefusal(scriptsOnRedis)
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, scenarios.BadParam(fmt.Errorf("redis: cannot use the URL %s — %s to a URL like %s", redisdb.Redact(raw), redisHint, redisdb.DefaultURL))
	}
	if opt.DialTimeout == 0 {
		opt.DialTimeout = 3 * time.Second
	}
	redisdb.ForRun(opt, p.Dial)
	s := &rdStore{url: redisdb.Redact(raw), opt: opt}
	admin, err := s.open(ctx, 1)
	if err != nil {
		return nil, err
	}
	// On a cluster node most keys would meet MOVED errors.
	if err := redisstore.RefuseCluster(ctx, "", admin.cl, scriptsOnRedis); err != nil {
		admin.cl.Close()
		return nil, err
	}
	s.admin = admin
	s.server = "Redis"
	if info, err := admin.cl.Info(ctx, "server").Result(); err == nil {
		s.server = serverFromInfo(info)
	}
	return s, nil
}

func serverFromInfo(info string) string {
	name, version := "Redis", ""
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "redis_version":
			version = v
		case "valkey_version":
			name, version = "Valkey", v
		}
	}
	return strings.TrimSpace(name + " " + version)
}

// open makes a client of one connection, pinged.
func (s *rdStore) open(ctx context.Context, _ int) (*rdConn, error) {
	o := *s.opt
	o.PoolSize, o.MaxIdleConns, o.MinIdleConns = 1, 1, 0
	cl := redis.NewClient(&o)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := cl.Ping(pctx).Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("redis: cannot connect to %s (%v) — is the server running? %s", s.opt.Addr, err, redisHint)
	}
	return &rdConn{cl: cl}, nil
}

func (s *rdStore) Server() string { return s.server }
func (s *rdStore) Where() string {
	return fmt.Sprintf("%s at %s, database %d", s.server, s.opt.Addr, s.opt.DB)
}
func (s *rdStore) Admin() Conn     { return s.admin }
func (s *rdStore) Notes() []string { return nil }
func (s *rdStore) Close() error    { return s.admin.Close() }

func (s *rdStore) Open(context.Context, int) (Pool, error) { return rdPool{s}, nil }

type rdPool struct{ s *rdStore }

// Session gives the worker a client of its own, one connection, dialled
// and pinged now.
func (p rdPool) Session(ctx context.Context, worker int) (SessionConn, error) {
	return p.s.open(ctx, worker)
}

func (rdPool) Close() error { return nil }

type rdConn struct{ cl *redis.Client }

// Snapshot reads the keys under the watched patterns (--effects auto).
func (s *rdStore) Snapshot(ctx context.Context, watch []string) (runner.Snapshot, error) {
	return redisstore.Snapshot(ctx, s.admin.cl, watch)
}

func (c *rdConn) Exec(ctx context.Context, st Stmt) (Reply, error) {
	args := make([]any, len(st.Args))
	for i, a := range st.Args {
		args[i] = a
	}
	v, err := c.cl.Do(ctx, args...).Result()
	if errors.Is(err, redis.Nil) {
		return Reply{Values: []string{""}}, nil
	}
	if err != nil {
		return Reply{}, err
	}
	return redisReply(v), nil
}

// redisReply reads a reply: its value, and as ROW_COUNT the integer of an
// integer reply (SADD's 1 or 0), 1 for any other value, or an array's length.
func redisReply(v any) Reply {
	switch x := v.(type) {
	case int64:
		return Reply{Values: []string{strconv.FormatInt(x, 10)}, Rows: x}
	case string:
		return Reply{Values: []string{x}, Rows: 1}
	case []any:
		r := Reply{Rows: int64(len(x))}
		for _, e := range x {
			r.Values = append(r.Values, fmt.Sprint(e))
		}
		if len(r.Values) == 0 {
			r.Values = []string{""}
		}
		return r
	case nil:
		return Reply{Values: []string{""}}
	}
	return Reply{Values: []string{fmt.Sprint(v)}, Rows: 1}
}

// Classify: an error reply is the command's own (unknown command, wrong
// type, a failing script), except those of a server that cannot serve
// now. Redis has no duplicate key and no deadlock.
func (c *rdConn) Classify(err error) (runner.Class, bool) {
	var re redis.Error
	if !errors.As(err, &re) {
		return runner.Error, false
	}
	msg := re.Error()
	for _, p := range []string{"LOADING", "BUSY", "OOM", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOAUTH", "WRONGPASS", "NOPERM"} {
		if strings.HasPrefix(msg, p) {
			return runner.Error, false
		}
	}
	return runner.Error, true
}

// Rollback discards a MULTI the script left open.
func (c *rdConn) Rollback(ctx context.Context) error {
	err := c.cl.Do(ctx, "DISCARD").Err()
	if err != nil && strings.Contains(err.Error(), "without MULTI") {
		return nil
	}
	return err
}

func (c *rdConn) Close() error { return c.cl.Close() }
