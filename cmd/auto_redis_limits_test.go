package cmd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/fakeredis"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// fakeClusterNode is a Redis server that says it is a Redis Cluster node
// (INFO cluster: cluster_enabled:1), as a node of a real cluster named by a
// plain redis:// URL does.
func fakeClusterNode(t *testing.T) string {
	return fakeredis.Start(t, func(_ int, args []string) string {
		switch strings.ToUpper(args[0]) {
		case "PING":
			return "+PONG\r\n"
		case "INFO":
			return fakeredis.Bulk("# Cluster\r\ncluster_enabled:1\r\n")
		case "SCAN":
			return "*2\r\n$1\r\n0\r\n*0\r\n"
		}
		return "+OK\r\n" // CLIENT SETINFO and the like
	}).URL()
}

// --effects auto:redis reads the keys of one server (SCAN): on a Redis
// Cluster it would see the keys of one node only, and call a race that
// wrote elsewhere SAFE. A cluster is refused with exit 2, whether its URL
// names its seeds or a plain redis:// URL names one of its nodes, as the
// effects check redis:CMD refuses it (docs/clusters.md).
func TestEffectsAutoRedisRefusesACluster(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	for name, url := range map[string]string{
		"seeds": "redis://127.0.0.1:1?addr=127.0.0.1:2",
		"node":  fakeClusterNode(t),
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := execCmd(t, false, "http", "POST", srv.URL+"/?c={{.Token}}", "--effects", "auto:redis", "--watch", "k:*",
				"--redis-url", url, "-n", "2", "--bursts", "2")
			if code != exitUsage || !strings.Contains(stderr, "--effects auto:redis (racetest http) does not run on a Redis Cluster yet; point --redis-url at a single server") {
				t.Errorf("auto:redis on a cluster (%s): exit %d, want %d and the refusal\n%s", url, code, exitUsage, stderr)
			}
		})
	}
}

// A snapshot reads at most 100,000 keys (docs/scripts.md): a pattern over
// more is refused with exit 2 and the way out, on racetest redis as over
// HTTP, before any burst runs.
func TestEffectsAutoRedisRefusesTooManyKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bursts on a store's own server (the mutation step's runs of cmd skip it)")
	}
	rdb, prefix := testenv.OwnRedis(t)
	ctx := context.Background()
	for b := 0; b*1000 <= redisstore.MaxSnapshotKeys; b++ {
		kv := make([]any, 0, 2000)
		for i := range 1000 {
			kv = append(kv, fmt.Sprintf("%s:k:%d", prefix, b*1000+i), 1)
		}
		if err := rdb.MSet(ctx, kv...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	want := fmt.Sprintf("--watch %s:k:*: more than %d keys to read per burst — narrow the pattern to the keys the attempt writes", prefix, redisstore.MaxSnapshotKeys)
	for name, args := range map[string][]string{
		"redis": {"redis", "--attempt", "INCR " + prefix + ":k:0", "--effects", "auto"},
		"http":  {"http", "POST", srv.URL + "/?c={{.Token}}", "--effects", "auto:redis"},
	} {
		t.Run(name, func(t *testing.T) {
			out, stderr, code := execCmd(t, false, append(args, "--watch", prefix+":k:*", "-n", "2", "--bursts", "2")...)
			if code != exitUsage || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, want %d and %q\n%s\n%s", code, exitUsage, want, out, stderr)
			}
			if v, _ := rdb.Get(ctx, prefix+":k:0").Int(); v != 1 {
				t.Errorf("an attempt ran before the refusal: %s:k:0 = %d", prefix, v)
			}
		})
	}
}

// Another writer on the watched keys changes the store while no attempt
// runs: the run is INCONCLUSIVE with that reason, never SAFE, even for a
// pattern that holds (INCRBY).
func TestEffectsAutoRedisAnotherWriter(t *testing.T) {
	rdb, prefix := testenv.OwnRedis(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			rdb.Incr(ctx, prefix+":balance:other")
			time.Sleep(100 * time.Microsecond)
		}
	}()
	defer func() { stop(); <-done }()
	t.Setenv("COLUMNS", "250")
	dir := "@../examples/auto/"
	out, stderr, code := execCmd(t, false, "redis", "--subject", dir+"subject.redis", "--attempt", dir+"deposit-fixed.redis", "--effects", "auto",
		"--teardown", dir+"drop.redis", "--watch", "balance:{{.RunID}}-*,"+prefix+":balance:*", "-n", "4", "--bursts", "10", "--timeline=false", "--strict")
	want := "the database changed while no attempt ran (`" + prefix + ":balance:*.value` +"
	if code != exitInconclusive || !strings.Contains(out, "INCONCLUSIVE") || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want %d and %q\n%s\n%s", code, exitInconclusive, want, out, stderr)
	}
}
