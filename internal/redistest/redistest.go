// Package redistest gives a test the Redis server of RACETEST_REDIS_URL
// and a key prefix of its own, deleted at the end. It sits beside
// internal/fakeredis: that one is a server a test answers itself, this one
// is the real server, shared by the tests of cmd and httpfire.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/scenarios/conformance"
)

// URL is the Redis server the tests use: RACETEST_REDIS_URL, or the
// default a run uses.
func URL() string {
	if raw := os.Getenv("RACETEST_REDIS_URL"); raw != "" {
		return raw
	}
	return redisdb.DefaultURL
}

// Own connects to the server of URL (skipping, or failing under
// RACETEST_REQUIRE_SERVERS, without it) and gives a key prefix of the
// test's own ("racetest_<8 hex>"): every key under prefix+":" is deleted
// when the test ends, and then the client is closed.
func Own(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opt, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("RACETEST_REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	// Closed after the keys are deleted: cleanups run last first.
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		conformance.Unavailable(t, "redis", err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	prefix := "racetest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 1000 {
				rdb.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			rdb.Unlink(ctx, keys...)
		}
		if err := iter.Err(); err != nil {
			t.Errorf("delete %s:* by hand: %v", prefix, err)
		}
	})
	return rdb, prefix
}
