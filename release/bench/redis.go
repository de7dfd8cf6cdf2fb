package bench

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// benchOnRedis names, in the refusal of a Redis Cluster, what refuses it.
const benchOnRedis = "racetest bench"

type redisStore struct {
	opt    *redis.Options
	prefix string
	admin  *redis.Client
}

func newRedisStore(ctx context.Context, url, prefix string) (*redisStore, error) {
	opt, err := benchRedisOptions(url)
	if err != nil {
		return nil, err
	}
	s := &redisStore{opt: opt, prefix: prefix}
	s.admin = redis.NewClient(s.options(nil, 2))
	if err := s.admin.Ping(ctx).Err(); err != nil {
		s.admin.Close()
		return nil, fmt.Errorf("redis: %s does not answer: %w", s.opt.Addr, err)
	}
	// On a cluster node most keys would meet MOVED errors.
	if err := redisstore.RefuseCluster(ctx, "", s.admin, benchOnRedis); err != nil {
		s.admin.Close()
		return nil, err
	}
	return s, nil
}

// options are racetest's own: no retries, no identity handshake, the
// context's deadline on the socket (as redisstore sets them).
func (s *redisStore) options(dial dialFunc, size int) *redis.Options {
	o := *s.opt
	o.PoolSize, o.MaxIdleConns = size, size
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if dial != nil {
		o.Dialer = dial
	}
	return &o
}

func (s *redisStore) prepare(context.Context) error { return nil }

func (s *redisStore) ctwKey(token string) string { return s.prefix + "ctw:" + token }

func (s *redisStore) effects(ctx context.Context, token string) (int, error) {
	n, err := s.admin.LLen(ctx, s.ctwKey(token)).Result()
	return int(n), err
}

func (s *redisStore) open(_ context.Context, dial dialFunc, workers int) (calApp, error) {
	return &redisApp{s: s, cl: redis.NewClient(s.options(dial, workers))}, nil
}

type redisApp struct {
	s  *redisStore
	cl *redis.Client
}

func (a *redisApp) session(ctx context.Context) (calSession, error) {
	cn := a.cl.Conn()
	if err := cn.Ping(ctx).Err(); err != nil {
		cn.Close()
		return nil, err
	}
	return &redisSession{s: a.s, cn: cn}, nil
}

func (a *redisApp) close() { a.cl.Close() }

type redisSession struct {
	s  *redisStore
	cn *redis.Conn
}

// arrive is TIME: Redis reads its clock as it runs the command. The server
// runs commands one after another, so two arrivals are never seen closer
// than one command's run.
func (r *redisSession) arrive(ctx context.Context) (int64, error) {
	t, err := r.cn.Time(ctx).Result()
	return t.UnixMicro(), err
}

func (r *redisSession) close() { r.cn.Close() }

// naive is a client with go-redis's defaults.
func (s *redisStore) naive(context.Context) (naivePool, error) {
	o := *s.opt
	return &redisNaive{s: s, cl: redis.NewClient(&o)}, nil
}

type redisNaive struct {
	s  *redisStore
	cl *redis.Client
}

// checkThenWrite is redisstore's check-then-write: EXISTS, then RPUSH.
func (r *redisNaive) checkThenWrite(ctx context.Context, token string, worker int) error {
	n, err := r.cl.Exists(ctx, r.s.ctwKey(token)).Result()
	if err != nil || n > 0 {
		return err
	}
	return r.cl.RPush(ctx, r.s.ctwKey(token), worker).Err()
}

func (r *redisNaive) arrive(ctx context.Context) (int64, error) {
	t, err := r.cl.Time(ctx).Result()
	return t.UnixMicro(), err
}

func (r *redisNaive) close() { r.cl.Close() }

func (s *redisStore) cleanup(ctx context.Context) error {
	iter := s.admin.Scan(ctx, 0, s.prefix+"*", 500).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("redis: listing the bench's keys %s*: %w", s.prefix, err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := s.admin.Del(ctx, keys[:n]...).Err(); err != nil {
			return fmt.Errorf("redis: deleting the bench's keys %s*: %w", s.prefix, err)
		}
		keys = keys[n:]
	}
	return nil
}

func (s *redisStore) close() { s.admin.Close() }

// user opens the user-style launcher (see LaunchersOf): one client with
// go-redis's defaults, shared by the goroutines, its pool warmed by a PING
// from each worker before the first burst.
func (s *redisStore) user(ctx context.Context, name string, n int) (userPool, error) {
	if name != UserRedis {
		return nil, fmt.Errorf("redis: no launcher %q", name)
	}
	o := *s.opt
	u := &redisUser{s: s, cl: redis.NewClient(&o)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = u.cl.Ping(ctx).Err() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		u.cl.Close()
		return nil, err
	}
	return u, nil
}

type redisUser struct {
	s  *redisStore
	cl *redis.Client
}

func (r *redisUser) checkThenWrite(ctx context.Context, token string, worker int) error {
	n, err := r.cl.Exists(ctx, r.s.ctwKey(token)).Result()
	if err != nil || n > 0 {
		return err
	}
	return r.cl.RPush(ctx, r.s.ctwKey(token), worker).Err()
}

func (r *redisUser) arrive(ctx context.Context, _ int) (int64, error) {
	t, err := r.cl.Time(ctx).Result()
	return t.UnixMicro(), err
}

func (r *redisUser) close() { r.cl.Close() }

// benchRedisOptions reads the bench's Redis URL (the default when empty),
// refusing a Redis Cluster, which the bench does not measure.
func benchRedisOptions(url string) (*redis.Options, error) {
	if url == "" {
		url = redisdb.DefaultURL
	}
	if redisstore.IsClusterURL(url) {
		return nil, redisstore.ClusterRefusal(benchOnRedis)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		// The parser's error repeats the URL as given, password included:
		// keep only its text, the URL and any password in it redacted.
		msg := strings.ReplaceAll(err.Error(), url, redisdb.Redact(url))
		if u, perr := neturl.Parse(url); perr == nil {
			if pw, ok := u.User.Password(); ok && pw != "" {
				msg = strings.ReplaceAll(msg, pw, "xxxxx")
			}
		}
		return nil, scenarios.BadParam(fmt.Errorf("redis: cannot use the URL %s: %s — set --redis-url or RACETEST_REDIS_URL to a URL like %s",
			redisdb.Redact(url), msg, redisdb.DefaultURL))
	}
	return opt, nil
}
