// Command storeserver is an HTTP benchmark target whose check and write are
// real database round trips, run in a process of its own: the window of a
// real service, not a parked timer. It speaks HTTP/1.1 and h2c on one port.
//
//	storeserver -addr 127.0.0.1:0 -store redis      # check: GET, write: INCR then SET
//	storeserver -addr 127.0.0.1:0 -store postgres   # check: SELECT, write: INSERT
//	storeserver -addr 127.0.0.1:0 -store parked     # no database: the write lands 100µs after the check
//
// The parked store is httpfiretest.CheckThenWrite with a 100µs window: the
// handler's gap is parked I/O, as the repo's in-process HTTP target has it,
// served from a process of its own like the others.
//
// POST /attempt?key=K checks whether K was written; if not, it writes it
// (200), else 409. GET /count?key=K is how many writes K got: the effects.
// Every response carries the X-Racetest-Arrival header (the instant the
// request's body was read), so racetest measures the arrival spread at the
// server. It prints "listening on ADDR" once ready, and on SIGINT/SIGTERM
// drops what it made: every key and table is under racetest_<id>_.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/httpfire/httpfiretest"
	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios"
)

// parkedWindow is the parked store's check-to-write window.
const parkedWindow = 100 * time.Microsecond

type store interface {
	// attempt checks key and writes it if absent: whether it wrote.
	attempt(ctx context.Context, key string) (bool, error)
	count(ctx context.Context, key string) (int64, error)
	cleanup(ctx context.Context) error
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	kind := flag.String("store", "redis", "redis, postgres or parked")
	redisURL := flag.String("redis-url", redisdb.DefaultURL, "Redis URL")
	pgURL := flag.String("postgres-url", sqldb.DefaultPostgresURL, "PostgreSQL URL")
	flag.Parse()
	ctx := context.Background()
	prefix := "racetest_" + scenarios.NewRunID() + "_storeserver_"
	var st store
	var err error
	var h http.Handler
	switch *kind {
	case "parked":
		// No store: the handler keeps its writes in memory, and there is
		// nothing to clean up.
		h = httpfiretest.NewCheckThenWrite(parkedWindow)
	case "redis":
		st, err = newRedis(ctx, *redisURL, prefix)
	case "postgres":
		st, err = newPG(ctx, *pgURL, prefix)
	default:
		err = fmt.Errorf("-store: redis, postgres or parked, not %q", *kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "storeserver:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		if st != nil {
			st.cleanup(ctx)
		}
		fmt.Fprintln(os.Stderr, "storeserver:", err)
		os.Exit(2)
	}
	if h == nil {
		h = handler(st)
	}
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	fmt.Printf("listening on %s\n", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	srv.Shutdown(sctx)
	if st == nil {
		return
	}
	if err := st.cleanup(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "storeserver: cleanup:", err)
		os.Exit(1)
	}
}

func handler(st store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /attempt", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set(httpfire.ArrivalHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
		wrote, err := st.attempt(r.Context(), r.URL.Query().Get("key"))
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case wrote:
			fmt.Fprintln(w, "written")
		default:
			http.Error(w, "already written", http.StatusConflict)
		}
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) {
		n, err := st.count(r.Context(), r.URL.Query().Get("key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, n)
	})
	return mux
}

type redisStore struct {
	c      *redis.Client
	prefix string

	mu   sync.Mutex
	made map[string]bool // every key written: cleanup deletes these, no SCAN of a shared keyspace
}

func newRedis(ctx context.Context, url, prefix string) (*redisStore, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = 64
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
	}
	return &redisStore{c: c, prefix: prefix, made: map[string]bool{}}, nil
}

// attempt: GET the key; when absent, INCR its write count and SET it — the
// check and the write are two round trips apart.
func (s *redisStore) attempt(ctx context.Context, key string) (bool, error) {
	err := s.c.Get(ctx, s.prefix+"k:"+key).Err()
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, redis.Nil) {
		return false, err
	}
	s.mu.Lock()
	s.made[s.prefix+"w:"+key], s.made[s.prefix+"k:"+key] = true, true
	s.mu.Unlock()
	if err := s.c.Incr(ctx, s.prefix+"w:"+key).Err(); err != nil {
		return false, err
	}
	return true, s.c.Set(ctx, s.prefix+"k:"+key, 1, 0).Err()
}

func (s *redisStore) count(ctx context.Context, key string) (int64, error) {
	n, err := s.c.Get(ctx, s.prefix+"w:"+key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

func (s *redisStore) cleanup(ctx context.Context) error {
	defer s.c.Close()
	s.mu.Lock()
	keys := make([]string, 0, len(s.made))
	for k := range s.made {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		if err := s.c.Del(ctx, batch...).Err(); err != nil {
			return err
		}
	}
	return nil
}

type pgStore struct {
	p     *pgxpool.Pool
	table string
}

// newPGAdmin is a small pool with the store's settings.
func newPGAdmin(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	return pgxpool.NewWithConfig(ctx, cfg)
}

func newPG(ctx context.Context, url, prefix string) (*pgStore, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 64
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &pgStore{p: p, table: prefix + "writes"}
	if _, err := p.Exec(ctx, "CREATE TABLE "+s.table+" (k text NOT NULL)"); err != nil {
		p.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return s, nil
}

// attempt: SELECT the key; when absent, INSERT it — no unique key, so two
// checks that both miss write twice.
func (s *pgStore) attempt(ctx context.Context, key string) (bool, error) {
	var n int64
	if err := s.p.QueryRow(ctx, "SELECT count(*) FROM "+s.table+" WHERE k = $1", key).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	_, err := s.p.Exec(ctx, "INSERT INTO "+s.table+" (k) VALUES ($1)", key)
	return err == nil, err
}

func (s *pgStore) count(ctx context.Context, key string) (n int64, err error) {
	err = s.p.QueryRow(ctx, "SELECT count(*) FROM "+s.table+" WHERE k = $1", key).Scan(&n)
	return n, err
}

func (s *pgStore) cleanup(ctx context.Context) error {
	defer s.p.Close()
	_, err := s.p.Exec(ctx, "DROP TABLE IF EXISTS "+s.table)
	return err
}
