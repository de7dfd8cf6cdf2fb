package bench

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
	"github.com/redis/go-redis/v9"
)

// TestTargetProcess serves each HTTP target from a process of its own, as
// racetest bench does (this test binary is the child, through TestMain):
// the window and the Redis URL reach it, it counts, and when the bench
// stops it the process ends and its keys are gone.
func TestTargetProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	serve := serveProcess(exe)
	ctx := context.Background()

	t.Run("spin", func(t *testing.T) {
		cfg := &Config{HTTPWindow: 1500 * time.Microsecond}
		url, desc, stop, err := serve(ctx, cfg, HTTPSpin, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(desc, "a process of its own") || !strings.Contains(desc, "a 1500.0µs spin") {
			t.Errorf("desc %q: want the process and the window given", desc)
		}
		key := "k-" + scenarios.NewRunID()
		if a, b := fireAt(t, url, key), fireAt(t, url, key); a != http.StatusOK || b != http.StatusConflict {
			t.Errorf("two requests one after the other: %d, %d; want 200 then 409", a, b)
		}
		if n := countAt(t, url, key); n != 1 {
			t.Errorf("count %d, want 1", n)
		}
		if err := stop(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := testClient.Get(url + "/count?key=" + key); err == nil {
			t.Error("the target still answers after stop")
		}
	})

	t.Run("redis", func(t *testing.T) {
		opt, err := benchRedisOptions(redisURL())
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			testenv.Unavailable(t, "redis", err)
			return
		}
		id := scenarios.NewRunID()
		prefix := runs.Prefix(id) + "bench_http_"
		cfg := &Config{HTTPWindow: DefaultHTTPWindow, Conn: scenarios.NewConnections(map[string]string{"redis": redisURL()})}
		url, desc, stop, err := serve(ctx, cfg, HTTPRedis, prefix, "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(desc, "EXISTS then RPUSH on Redis at "+opt.Addr) {
			t.Errorf("desc %q: want the Redis given (%s)", desc, opt.Addr)
		}
		key := "k-" + scenarios.NewRunID()
		fireAt(t, url, key)
		if n := countAt(t, url, key); n != 1 {
			t.Errorf("count %d, want 1", n)
		}
		if keys, _ := rdb.Keys(ctx, prefix+"*").Result(); len(keys) != 1 {
			t.Errorf("keys under the prefix: %v, want the one written", keys)
		}
		if n, _ := rdb.Exists(ctx, runs.Marker(id)).Result(); n != 1 {
			t.Errorf("the target's process did not register its run")
		}
		if err := stop(ctx); err != nil {
			t.Fatal(err)
		}
		if left, _ := rdb.Keys(ctx, runs.Prefix(id)+"*").Result(); len(left) > 0 {
			t.Errorf("the target's process left %v (its keys or its run's registration)", left)
		}
	})

	t.Run("postgres through a proxy", func(t *testing.T) {
		conn := serverConns()
		px, err := startProxy(ctx, conn, HTTPPostgres)
		if err != nil {
			testenv.Unavailable(t, "postgres", err)
			return
		}
		defer px.Close()
		id := scenarios.NewRunID()
		prefix := runs.Prefix(id) + "bench_http_"
		cfg := &Config{HTTPWindow: DefaultHTTPWindow, Conn: conn}
		url, desc, stop, err := serve(ctx, cfg, HTTPPostgres, prefix, px.ServiceURL())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(desc, "through racetest proxy at "+px.Addr()) {
			t.Errorf("desc %q: want the proxy given (%s)", desc, px.Addr())
		}
		// One write straight, one through the proxy (outside a burst it
		// relays): both land in the one table, and each path sees the other's.
		key := "k-" + scenarios.NewRunID()
		if a, b := fireAt(t, url, key), fireAt(t, url+proxiedPath, key); a != http.StatusOK || b != http.StatusConflict {
			t.Errorf("straight then through the proxy: %d, %d; want 200 then 409", a, b)
		}
		other := "k-" + scenarios.NewRunID()
		if a := fireAt(t, url+proxiedPath, other); a != http.StatusOK {
			t.Errorf("through the proxy: %d, want 200", a)
		}
		if n, m := countAt(t, url, key), countAt(t, url, other); n != 1 || m != 1 {
			t.Errorf("counts %d and %d, want 1 and 1", n, m)
		}
		if err := stop(ctx); err != nil {
			t.Fatal(err)
		}
		admin, err := pgx.Connect(ctx, testenv.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		var left int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename LIKE $1", runs.Prefix(id)+"%").Scan(&left); err != nil || left != 0 {
			t.Errorf("the target's process left %d tables of its run (%v)", left, err)
		}
	})

	t.Run("no redis", func(t *testing.T) {
		cfg := &Config{HTTPWindow: DefaultHTTPWindow, Conn: scenarios.NewConnections(map[string]string{"redis": "redis://127.0.0.1:9"})}
		_, _, _, err := serve(ctx, cfg, HTTPRedis, "racetest_"+scenarios.NewRunID()+"_bench_http_", "")
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:9 does not answer") {
			t.Errorf("err %v: want the child's own words, naming the server", err)
		}
	})

	t.Run("bad url", func(t *testing.T) {
		cfg := &Config{Conn: scenarios.NewConnections(map[string]string{"redis": "redis://bad host"})}
		_, _, _, err := serve(ctx, cfg, HTTPRedis, "p_", "")
		var bad *scenarios.ParamError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), "cannot use the URL redis://bad host") {
			t.Errorf("err %v: want the URL refused, as the user's slip", err)
		}
	})
}
