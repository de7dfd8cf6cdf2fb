package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// A key with a time to live that is gone past it expired: the snapshots
// of a run do not change for it, then or later. A key deleted before its
// time, a key made, and a time to live removed are changes, as another
// writer's are. Keys of racetest's runs are read only under a pattern
// that names them.
func TestSnapshotterKeysThatExpire(t *testing.T) {
	rdb, prefix := testenv.OwnRedis(t)
	ctx := context.Background()
	var s redisstore.Snapshotter
	pattern := prefix + ":rl:*"
	snap := func() runner.Snapshot {
		t.Helper()
		got, err := s.Snapshot(ctx, rdb, []string{pattern})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// change is what changed from a to b, as "KEY±N" sorted, the pattern
	// left out of the keys.
	change := func(a, b runner.Snapshot) string {
		d := b.Change(a)
		var out []string
		for _, k := range d.Keys() {
			out = append(out, strings.TrimPrefix(k, pattern)+runner.Signed(d[k]))
		}
		return strings.Join(out, " ")
	}
	rdb.Set(ctx, prefix+":rl:a", "3", 100*time.Millisecond)
	rdb.Set(ctx, prefix+":rl:kept", "10", time.Minute)
	first := snap()
	if got := first[pattern+".expiring"]; got == nil || got.RatString() != "2" {
		t.Errorf("expiring %v, want 2", got)
	}
	for deadline := time.Now().Add(3 * time.Second); rdb.Exists(ctx, prefix+":rl:a").Val() == 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the key did not expire")
		}
	}
	gone := snap()
	if c := change(first, gone); c != "" {
		t.Errorf("a key expired, and the snapshot changed: %s", c)
	}
	if c := change(gone, snap()); c != "" {
		t.Errorf("a key expired, and the next snapshot changed: %s", c)
	}
	// Made again after it expired: a new key.
	rdb.Set(ctx, prefix+":rl:a", "1", time.Minute)
	again := snap()
	if c := change(gone, again); c != " rows+1 .expiring+1 .value+1" {
		t.Errorf("a key made: change %q, want rows, expiring and value +1", c)
	}
	// Deleted before its time: another writer (or an attempt).
	rdb.Del(ctx, prefix+":rl:kept")
	deleted := snap()
	if c := change(again, deleted); c != " rows-1 .expiring-1 .value-10" {
		t.Errorf("a key deleted before its time: change %q, want rows, expiring -1 and value -10", c)
	}
	rdb.Persist(ctx, prefix+":rl:a")
	if c := change(deleted, snap()); c != ".expiring-1" {
		t.Errorf("a time to live removed: change %q, want expiring -1", c)
	}
	// Another run's keys, under a pattern that does not name them.
	other := "racetest_" + strings.TrimPrefix(prefix, "racetest_") + "x:rl"
	rdb.Set(ctx, other, "5", time.Minute)
	defer rdb.Del(ctx, other)
	got, err := s.Snapshot(ctx, rdb, []string{"*" + strings.TrimPrefix(prefix, "racetest_") + "x:rl"})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range got {
		if v.Sign() != 0 {
			t.Errorf("a run's key read under a pattern not starting with racetest_: %s = %v", k, v)
		}
	}
}
