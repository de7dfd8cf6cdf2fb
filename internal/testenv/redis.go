package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Redis connects to the Redis test server (without it, Unavailable) and
// closes the client when the test ends. The client retries nothing: a
// test's own calls mean what they say.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(URL("redis"))
	if err != nil {
		t.Fatalf("%s: %v", Env("redis"), err)
	}
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	// Closed after what a later cleanup does with it: cleanups run last first.
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		Unavailable(t, "redis", err)
	}
	return rdb
}

// OwnRedis is Redis and a key prefix of the test's own
// ("racetest_<8 hex>"): every key under prefix+":" is deleted when the
// test ends, and then the client is closed.
func OwnRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	rdb := Redis(t)
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
