package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/racetest/racetest/scenarios/runs"
)

// httpTarget is the endpoint the HTTP bench fires at, served by the bench
// itself: POST /?key=K is a check-then-write on K (200 when it wrote, 409
// when K was taken), GET /count?key=K the times it wrote K, counted by the
// target itself. It stamps each arrival, once the body is read, in
// httpfire.ArrivalHeader, as racetest serve does. A database-backed target
// serves the same endpoint under proxiedPath on its pool through the
// proxy (proxied).
type httpTarget struct{ act, proxied actor }

// actor is a target's check and write, and its count of writes.
type actor interface {
	// checkThenWrite checks key and, if it is free, writes it; it reports
	// whether it wrote.
	checkThenWrite(ctx context.Context, key string) (bool, error)
	writes(ctx context.Context, key string) (int, error)
	cleanup(ctx context.Context) error
	close()
}

func newHTTPTarget(act actor) *httpTarget {
	t := &httpTarget{act: act}
	if p, ok := act.(interface{ proxied() actor }); ok {
		t.proxied = p.proxied()
	}
	return t
}

func (t *httpTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if key == "" {
		http.Error(w, "no key", http.StatusBadRequest)
		return
	}
	act, path := t.act, r.URL.Path
	if rest, ok := strings.CutPrefix(path, proxiedPath); ok {
		if t.proxied == nil {
			http.Error(w, "no proxy in front of this target's database", http.StatusNotFound)
			return
		}
		act, path = t.proxied, rest
	}
	if path == "/count" {
		n, err := act.writes(r.Context(), key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, n)
		return
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set(httpfire.ArrivalHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
	wrote, err := act.checkThenWrite(r.Context(), key)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case !wrote:
		http.Error(w, "already written", http.StatusConflict)
	default:
		fmt.Fprintln(w, "written")
	}
}

// spinActor is a check-then-write on an in-memory flag with a window of W
// between the check and the write, waited by spinning (yielding, so that
// the server's other handlers run: on two cores a spin that never yields
// measures Go's scheduler, not the release).
type spinActor struct {
	window time.Duration
	mu     sync.Mutex
	taken  map[string]bool
	count  map[string]int
}

func newSpinActor(window time.Duration) *spinActor {
	return &spinActor{window: window, taken: map[string]bool{}, count: map[string]int{}}
}

func (s *spinActor) checkThenWrite(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	taken := s.taken[key]
	s.mu.Unlock()
	if taken {
		return false, nil
	}
	for end := time.Now().Add(s.window); time.Now().Before(end); {
		runtime.Gosched()
	}
	s.mu.Lock()
	s.taken[key] = true
	s.count[key]++
	s.mu.Unlock()
	return true, nil
}

func (s *spinActor) writes(_ context.Context, key string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[key], nil
}

func (s *spinActor) cleanup(context.Context) error { return nil }
func (s *spinActor) close()                        {}

// redisActor is a check-then-write on Redis, as a handler writes it with
// go-redis: EXISTS key, then RPUSH key when it was absent; the writes are
// the list's length. Its keys are prefix+K, deleted by cleanup.
type redisActor struct {
	rdb    *redis.Client
	prefix string
	id     string // the run prefix names, registered while its keys exist
}

// redisPool is the handler's pool: large enough that the N=64 burst's
// handlers never queue for a connection (the queue would be the target's
// own serialisation, not the release's).
const redisPool = 128

func newRedisActor(ctx context.Context, url, prefix string) (*redisActor, error) {
	opt, err := benchRedisOptions(url)
	if err != nil {
		return nil, err
	}
	opt.PoolSize, opt.MinIdleConns = redisPool, 0
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	// The keys are a run's, registered as a scenario's are, so that
	// 'racetest clean' can drop what a bench killed outright left.
	id, ok := runs.RunOf(prefix)
	if !ok || !strings.HasPrefix(prefix, runs.Prefix(id)) {
		return nil, fmt.Errorf("redis: the bench's keys need a run's prefix (racetest_<run id>_…), not %q", prefix)
	}
	a := &redisActor{rdb: redis.NewClient(opt), prefix: prefix, id: id}
	if err := a.rdb.Ping(ctx).Err(); err != nil {
		a.rdb.Close()
		return nil, fmt.Errorf("redis: %s does not answer: %w", opt.Addr, err)
	}
	if err := redisstore.RefuseCluster(ctx, "", a.rdb, benchOnRedis); err != nil {
		a.rdb.Close()
		return nil, err
	}
	if err := runs.RegisterRedis(ctx, a.rdb, runs.New(id)); err != nil {
		a.rdb.Close()
		return nil, err
	}
	return a, nil
}

func (a *redisActor) checkThenWrite(ctx context.Context, key string) (bool, error) {
	n, err := a.rdb.Exists(ctx, a.prefix+key).Result()
	if err != nil || n > 0 {
		return false, err
	}
	return true, a.write(ctx, key)
}

// write is the target's action: a push, after the check's round trip. The
// key then lives a day (runs.KeyTTL), as every key a run writes: a bench
// killed before its cleanup leaves nothing for good.
func (a *redisActor) write(ctx context.Context, key string) error {
	if err := a.rdb.RPush(ctx, a.prefix+key, "written").Err(); err != nil {
		return err
	}
	return a.rdb.Expire(ctx, a.prefix+key, runs.KeyTTL).Err()
}

func (a *redisActor) writes(ctx context.Context, key string) (int, error) {
	n, err := a.rdb.LLen(ctx, a.prefix+key).Result()
	return int(n), err
}

// cleanup deletes the run's keys (its prefix holds the target's alone),
// then its registration.
func (a *redisActor) cleanup(ctx context.Context) error {
	if _, err := runs.DropRedis(ctx, a.rdb, a.id); err != nil {
		return fmt.Errorf("redis: deleting the bench's keys %s*: %w — delete them with 'racetest clean --backend redis --run-id %s'", a.prefix, err, a.id)
	}
	return nil
}

func (a *redisActor) close() { a.rdb.Close() }

// httpServer serves a target on 127.0.0.1 over HTTP/1.1 and h2c (HTTP/2
// with prior knowledge) on one port: each release mode finds the protocol
// it needs, and auto finds HTTP/2, as it would on a server that speaks it.
type httpServer struct {
	URL string
	srv *http.Server
	ln  net.Listener
}

func startHTTPServer(h http.Handler) (*httpServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the HTTP target: %w", err)
	}
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols), ReadHeaderTimeout: 30 * time.Second}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed at close
	return &httpServer{URL: "http://" + ln.Addr().String(), srv: srv, ln: ln}, nil
}

func (s *httpServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.srv.Close()
	}
	s.srv.Close()
}
