package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/redis/go-redis/v9"
)

// markerTTL outlives every key of the run: the marker is refreshed while
// the run goes on (RefreshRedis), and each key lives KeyTTL from its write.
const markerTTL = KeyTTL + time.Hour

// Marker is the key that registers run id on Redis: it holds the Record as
// JSON, and lives under the run's own prefix.
func Marker(runID string) string { return Prefix(runID) + "run" }

type markerJSON struct {
	Racetest  string `json:"racetest"` // "run": tells a marker from a key that happens to share its name
	RunID     string `json:"run_id"`
	StartedMS int64  `json:"started_ms"`
	Host      string `json:"host"`
	PID       int    `json:"pid"`
}

// RegisterRedis registers r: it writes the marker (SET NX, so an id in use
// is refused) and then makes sure no other key has the run's prefix.
func RegisterRedis(ctx context.Context, cl redis.Cmdable, r Record) error {
	body, _ := json.Marshal(markerJSON{Racetest: "run", RunID: r.RunID, StartedMS: r.Started.UnixMilli(), Host: r.Host, PID: r.PID})
	ok, err := cl.SetNX(ctx, Marker(r.RunID), body, markerTTL).Result()
	if err != nil {
		return fmt.Errorf("redis: cannot register run %s (SET %s): %w", r.RunID, Marker(r.RunID), err)
	}
	if !ok {
		return &InUseError{Backend: "redis", RunID: r.RunID}
	}
	keys, err := KeysRedis(ctx, cl, r.RunID, 1)
	if err == nil && len(keys) > 0 {
		err = &InUseError{Backend: "redis", RunID: r.RunID, Example: "key " + keys[0]}
	}
	if err != nil {
		cl.Del(context.WithoutCancel(ctx), Marker(r.RunID))
		return err
	}
	return nil
}

// RefreshRedis keeps a long run's marker alive.
func RefreshRedis(ctx context.Context, cl redis.Cmdable, runID string) error {
	return cl.PExpire(ctx, Marker(runID), markerTTL).Err()
}

// KeysRedis lists up to limit keys under run id's prefix, the marker aside
// (limit 0: all). It walks the keyspace with SCAN, never KEYS, which would
// block the server.
func KeysRedis(ctx context.Context, cl redis.Cmdable, runID string, limit int) ([]string, error) {
	return scanPrefix(ctx, cl, Prefix(runID), limit, Marker(runID))
}

// scanPrefix lists the keys under prefix, except one. On a Redis Cluster it
// walks every primary: each holds only its own slots' keys, and SCAN through
// the cluster client would ask one node only.
func scanPrefix(ctx context.Context, cl redis.Cmdable, prefix string, limit int, except string) ([]string, error) {
	cc, ok := cl.(*redis.ClusterClient)
	if !ok {
		return scanNode(ctx, cl, prefix, limit, except)
	}
	var mu sync.Mutex
	var out []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		ks, err := scanNode(ctx, node, prefix, limit, except)
		mu.Lock()
		defer mu.Unlock()
		out = append(out, ks...)
		if err != nil {
			return fmt.Errorf("primary %s: %w", node.Options().Addr, err)
		}
		return nil
	})
	sort.Strings(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// scanNode lists the keys under prefix on one server.
func scanNode(ctx context.Context, cl redis.Cmdable, prefix string, limit int, except string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		ks, next, err := cl.Scan(ctx, cursor, redisdb.GlobEscape(prefix)+"*", 1000).Result()
		if err != nil {
			return out, err
		}
		for _, k := range ks {
			// SCAN's MATCH is a glob: compare again, whatever the server's
			// glob does.
			if strings.HasPrefix(k, prefix) && k != except {
				out = append(out, k)
				if limit > 0 && len(out) >= limit {
					return out, nil
				}
			}
		}
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// DropRedis deletes run id's keys, the marker last, and returns how many
// keys it deleted.
func DropRedis(ctx context.Context, cl redis.Cmdable, runID string) (int, error) {
	keys, err := KeysRedis(ctx, cl, runID, 0)
	if err != nil {
		return 0, err
	}
	if cc, ok := cl.(*redis.ClusterClient); ok {
		n, err := dropCluster(ctx, cc, keys)
		if err != nil {
			return n, err
		}
		return n, cl.Del(ctx, Marker(runID)).Err()
	}
	n := 0
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		if err := cl.Del(ctx, batch...).Err(); err != nil {
			return n, err
		}
		n += len(batch)
	}
	return n, cl.Del(ctx, Marker(runID)).Err()
}

// dropCluster deletes keys on a Redis Cluster, one DEL each in a pipeline
// that the cluster client sends to each key's primary: a DEL of several keys
// is refused there unless all are in one hash slot, and keys a run left may
// not be.
func dropCluster(ctx context.Context, cc *redis.ClusterClient, keys []string) (int, error) {
	n := 0
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		cmds, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range batch {
				p.Del(ctx, k)
			}
			return nil
		})
		for _, c := range cmds {
			if c.Err() == nil {
				n++
			}
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// LeftoversRedis lists the registered runs (their markers) and every key
// that follows racetest's naming scheme.
func LeftoversRedis(ctx context.Context, cl redis.Cmdable) ([]Leftover, error) {
	keys, err := scanPrefix(ctx, cl, "racetest_", 0, "")
	if err != nil {
		return nil, fmt.Errorf("redis: cannot list keys (SCAN): %w", err)
	}
	var records []Record
	var names []string
	for _, k := range keys {
		id, ok := RunOf(k)
		if !ok {
			continue
		}
		if k == Marker(id) {
			if r, err := readMarker(ctx, cl, k); err == nil {
				records = append(records, r)
				continue
			}
		}
		names = append(names, k)
	}
	return Group(records, names), nil
}

func readMarker(ctx context.Context, cl redis.Cmdable, key string) (Record, error) {
	v, err := cl.Get(ctx, key).Result()
	if err != nil {
		return Record{}, err
	}
	var m markerJSON
	if err := json.Unmarshal([]byte(v), &m); err != nil || m.Racetest != "run" {
		return Record{}, errors.New("not a racetest marker")
	}
	return Record{RunID: m.RunID, Started: time.UnixMilli(m.StartedMS).UTC(), Host: m.Host, PID: m.PID}, nil
}
