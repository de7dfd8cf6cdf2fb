package anomalies

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/racetest/racetest/scenarios/runs"
)

// The engine contract, and the optional parts the Redis target promises.
var (
	_ runner.Target     = (*redisTarget)(nil)
	_ runner.Allowancer = (*redisTarget)(nil)
	_ runner.Requirer   = (*redisTarget)(nil)
	_ runner.Noter      = (*redisTarget)(nil)
	_ runner.Closer     = (*redisTarget)(nil)
)

// Redis has lost-update's pattern (GET, then SET of the value computed in
// the client) and both of its fixes without locks: INCR, and optimistic
// concurrency with WATCH/MULTI/EXEC. It has no SELECT … FOR UPDATE, no
// multi-key read-then-write isolation for write-skew, and its job queues
// pop atomically, so only lost-update runs here.
var redisLostUpdate = map[string]redisAttempt{
	Naive:   redisReadModifyWrite,
	Atomic:  redisIncrement,
	Version: redisWatched,
}

type redisAttempt func(ctx context.Context, s *redisSession, subj runner.Subject, w *runner.Worker) error

const redisConnectTimeout = redisdb.ConnectTimeout

// keyTTL bounds every key the run writes: a killed run's keys expire.
var keyTTL = runs.KeyTTL

func redisFactory(scenario string) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, scenarios.BadParam(err)
		}
		variant, err := pickVariant("redis", scenario, p.Variant)
		if err != nil {
			return nil, err
		}
		attempt, ok := redisLostUpdate[variant]
		if !ok {
			return nil, scenarios.BadParam(fmt.Errorf("redis: %s has no variant %q on Redis, which has no SELECT … FOR UPDATE; use naive, atomic or version", scenario, variant))
		}
		raw := redisdb.RunURL(p.Conn.Get(redisstore.Name))
		if redisstore.IsClusterURL(raw) {
			return nil, redisstore.ClusterRefusal(scenario)
		}
		// The attempt's deadline bounds each call, nothing is retried behind
		// the pattern's back, and MULTI/EXEC stays on the worker's one
		// connection.
		opt, err := redisdb.RunOptions(raw, p.Dial)
		if err != nil {
			return nil, err
		}
		t := &redisTarget{p: p, variant: variant, attempt: attempt, opt: opt, redacted: redisdb.Redact(raw), tallies: map[int]tally{}}
		t.admin = t.client(2)
		if err := redisdb.Ping(ctx, t.admin); err != nil {
			t.admin.Close()
			return nil, fmt.Errorf("redis: cannot reach %s: %w — is the server running? set --redis-url or RACETEST_REDIS_URL", t.redacted, err)
		}
		// On a cluster node most keys would meet MOVED errors.
		if err := redisstore.RefuseCluster(ctx, "", t.admin, scenario); err != nil {
			t.admin.Close()
			return nil, err
		}
		return t, nil
	}
}

type redisTarget struct {
	p        scenarios.Params
	variant  string
	attempt  redisAttempt
	opt      *redis.Options
	redacted string
	admin    *redis.Client

	mu         sync.Mutex
	registered bool
	tallies    map[int]tally
}

func (t *redisTarget) client(pool int) *redis.Client {
	opt := *t.opt
	opt.PoolSize = max(pool, 1)
	opt.MaxIdleConns = opt.PoolSize
	return redis.NewClient(&opt)
}

// keys of one burst's account: the balance the clients compute, and the
// writes the store counts itself (INCR, which cannot be lost).
func (t *redisTarget) keys(burst int) (balance, writes string) {
	k := t.p.Prefix() + "account" + strconv.Itoa(burst)
	return k + ":balance", k + ":writes"
}

func (t *redisTarget) Prepare(ctx context.Context) error {
	err := runs.RegisterRedis(context.WithoutCancel(ctx), t.admin, runs.New(t.p.RunID))
	var inUse *runs.InUseError
	t.mu.Lock()
	t.registered = !errors.As(err, &inUse)
	t.mu.Unlock()
	if err != nil {
		return errors.Join(err, t.Cleanup(ctx))
	}
	return nil
}

// Cleanup deletes the run's keys and its marker.
func (t *redisTarget) Cleanup(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.registered {
		return nil
	}
	cctx, cancel := scenarios.CleanupContext(ctx)
	defer cancel()
	if _, err := runs.DropRedis(cctx, t.admin, t.p.RunID); err != nil {
		return fmt.Errorf("redis: could not delete this run's keys at %s (run 'racetest clean --run-id %s'): %w", t.redacted, t.p.RunID, err)
	}
	t.registered = false
	return nil
}

func (t *redisTarget) Close() error { return t.admin.Close() }

func (t *redisTarget) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	balance, writes := t.keys(burst)
	s := runner.Subject{Burst: burst, Key: balance, Data: writes}
	if err := t.admin.MSet(ctx, balance, 0, writes, 0).Err(); err != nil {
		return s, fmt.Errorf("redis: prepare burst %d: %w", burst, err)
	}
	if err := t.admin.PExpire(ctx, balance, keyTTL).Err(); err != nil {
		return s, err
	}
	return s, t.admin.PExpire(ctx, writes, keyTTL).Err()
}

func (t *redisTarget) Effects(ctx context.Context, s runner.Subject) (int, error) {
	vals, err := t.admin.MGet(ctx, s.Key, s.Data.(string)).Result()
	if err != nil {
		return 0, fmt.Errorf("redis: count effects: %w", err)
	}
	n := make([]int, 2)
	for i, v := range vals {
		if str, ok := v.(string); ok {
			n[i], _ = strconv.Atoi(str)
		}
	}
	t.mu.Lock()
	t.tallies[s.Burst] = tally{effects: n[0], allowed: n[1], required: n[1]}
	t.mu.Unlock()
	return n[0], nil
}

func (t *redisTarget) Allowed(s runner.Subject, _ [runner.NumClasses]int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tallies[s.Burst].allowed
}

func (t *redisTarget) Required(s runner.Subject, _ [runner.NumClasses]int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.tallies[s.Burst].required
	delete(t.tallies, s.Burst)
	return r
}

func (t *redisTarget) Notes() []string {
	return []string{"redis: effects are the increments in the balance key; each committed write also runs INCR on a writes key, and fewer increments than writes is a lost update"}
}

func (t *redisTarget) Open(context.Context, int, int) (runner.App, error) {
	return &redisApp{t: t}, nil
}

type redisApp struct{ t *redisTarget }

// Session gives the worker a client of its own with one connection (WATCH
// holds a connection for its transaction), dialled and checked now.
func (a *redisApp) Session(ctx context.Context, worker int) (runner.Session, error) {
	cn := a.t.client(1)
	pctx, cancel := context.WithTimeout(ctx, redisConnectTimeout)
	defer cancel()
	if err := cn.Ping(pctx).Err(); err != nil {
		cn.Close()
		return nil, fmt.Errorf("redis: worker %d could not connect to %s: %w", worker, a.t.redacted, err)
	}
	return &redisSession{t: a.t, cn: cn}, nil
}

func (a *redisApp) Close() error { return nil }

type redisSession struct {
	t  *redisTarget
	cn *redis.Client
}

func (s *redisSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	return outcome(s.t.attempt(ctx, s, subj, w))
}

func (s *redisSession) Close() error { return s.cn.Close() }

// write sets the balance and counts the write, in one MULTI/EXEC.
func write(ctx context.Context, p redis.Pipeliner, subj runner.Subject, balance int) {
	p.Set(ctx, subj.Key, balance, keyTTL)
	p.Incr(ctx, subj.Data.(string))
}

// redisReadModifyWrite: GET, then SET of read + 1, computed in the client.
func redisReadModifyWrite(ctx context.Context, s *redisSession, subj runner.Subject, w *runner.Worker) error {
	w.Step(ctx, "check")
	balance, err := s.cn.Get(ctx, subj.Key).Int()
	if err == nil {
		err = scenarios.Sleep(ctx, s.t.p.Gap)
	}
	if err != nil {
		return err
	}
	w.Step(ctx, "act")
	_, err = s.cn.TxPipelined(ctx, func(p redis.Pipeliner) error {
		write(ctx, p, subj, balance+1)
		return nil
	})
	return err
}

// redisIncrement lets the store add: INCR, and the write's own count.
func redisIncrement(ctx context.Context, s *redisSession, subj runner.Subject, w *runner.Worker) error {
	w.Step(ctx, "act")
	_, err := s.cn.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, subj.Key)
		p.Incr(ctx, subj.Data.(string))
		return nil
	})
	return err
}

// redisWatched is optimistic concurrency: WATCH the balance, GET it, and
// write in MULTI/EXEC, which the server refuses (a nil EXEC) when the
// balance changed since the WATCH; then read again.
func redisWatched(ctx context.Context, s *redisSession, subj runner.Subject, w *runner.Worker) error {
	tries := maxTries(s.t.p)
	for try := 1; ; try++ {
		err := s.cn.Watch(ctx, func(tx *redis.Tx) error {
			w.Step(ctx, "check")
			balance, err := tx.Get(ctx, subj.Key).Int()
			if err == nil {
				err = scenarios.Sleep(ctx, s.t.p.Gap)
			}
			if err != nil {
				return err
			}
			w.Step(ctx, "act")
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				write(ctx, p, subj, balance+1)
				return nil
			})
			return err
		}, subj.Key)
		switch {
		case !errors.Is(err, redis.TxFailedErr):
			return err
		case try == tries:
			return errDeclined{fmt.Sprintf("the balance changed under WATCH on each of %d tries", tries)}
		}
	}
}
