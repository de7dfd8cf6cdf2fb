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
	"github.com/racetest/racetest/scenarios/runs"
)

// benchOnRedis names, in the refusal of a Redis Cluster, what refuses it.
const benchOnRedis = "racetest bench"

type redisStore struct {
	opt    *redis.Options
	prefix string
	admin  *redis.Client
	id     string // the bench's run id, whose marker registers its keys
	// registered: the marker may have been written, and the run's keys
	// are the bench's to delete (not when the id was another run's).
	registered bool
}

func newRedisStore(ctx context.Context, url, runID string) (*redisStore, error) {
	opt, err := benchRedisOptions(url)
	if err != nil {
		return nil, err
	}
	s := &redisStore{opt: opt, prefix: benchPrefix(runID), id: runID}
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

// prepare registers the run: its keys are then for 'racetest clean' to
// drop if the bench is killed outright.
func (s *redisStore) prepare(ctx context.Context) error {
	err := runs.RegisterRedis(ctx, s.admin, runs.New(s.id))
	var inUse *runs.InUseError
	s.registered = !errors.As(err, &inUse)
	return err
}

func (s *redisStore) ctwKey(token string) string { return s.prefix + "ctw:" + token }

// effects counts the burst's writes, and gives its key the TTL every key a
// run writes has (runs.KeyTTL): the launchers write it as users do, with a
// plain RPUSH, and the bench reads each burst's count right after it.
func (s *redisStore) effects(ctx context.Context, token string) (int, error) {
	var n *redis.IntCmd
	_, err := s.admin.Pipelined(ctx, func(p redis.Pipeliner) error {
		n = p.LLen(ctx, s.ctwKey(token))
		p.PExpire(ctx, s.ctwKey(token), runs.KeyTTL)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return int(n.Val()), nil
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

// cleanup deletes the run's keys, then its marker.
func (s *redisStore) cleanup(ctx context.Context) error {
	if !s.registered {
		return nil
	}
	if _, err := runs.DropRedis(ctx, s.admin, s.id); err != nil {
		return fmt.Errorf("redis: deleting the bench's keys %s*: %w — delete them with 'racetest clean --backend redis --run-id %s'", s.prefix, err, s.id)
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
