package testenv_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
)

// The keys a test writes under its prefix are gone when it ends, more than
// one SCAN batch of them too, and nothing outside the prefix is touched.
func TestOwnDeletesItsKeysAtTheEnd(t *testing.T) {
	ctx := context.Background()
	outsider, other := testenv.OwnRedis(t)
	if err := outsider.Set(ctx, other+":keep", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var prefix string
	t.Run("writer", func(t *testing.T) {
		rdb, p := testenv.OwnRedis(t)
		prefix = p
		pipe := rdb.Pipeline()
		for i := range 2500 {
			pipe.Set(ctx, p+":k"+strconv.Itoa(i), "1", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if prefix == "" || prefix == other {
		t.Fatalf("prefixes %q and %q: want two of their own", prefix, other)
	}
	if keys, err := outsider.Keys(ctx, prefix+":*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("%d keys of the ended test left (%v)", len(keys), err)
	}
	if n, err := outsider.Exists(ctx, other+":keep").Result(); err != nil || n != 1 {
		t.Errorf("another test's key was deleted (%v)", err)
	}
}
