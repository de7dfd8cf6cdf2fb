package redisstore

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/scenarios"
)

// A Redis Cluster is given to --redis-url in one of three ways:
//
//	redis://h1:p1?addr=h2:p2&addr=h3:p3   go-redis's cluster URL (redis.ParseClusterURL)
//	redis://h1:p1,h2:p2,h3:p3/0           seed addresses separated by commas, as
//	                                      scripts/cluster.sh prints them
//	redis://h1:p1/0                       one node of the cluster: a server whose
//	                                      INFO cluster says cluster_enabled:1
//
// The first two are known from the URL; the third only once the server
// answers, and a plain client would otherwise get a MOVED error for most keys.
//
// On a cluster every key of a run carries the hash tag {<run id>}, so the
// whole run lives in one hash slot, on one primary: the scripts' two keys are
// in one slot as Redis requires, and each worker keeps a dedicated connection
// to that primary, as on one server, so the last-byte release works unchanged.

// seedsOf reports whether raw names a cluster by its seeds (the first two
// forms above) and returns them, first the URL's own host. A URL url.Parse
// refuses is no cluster URL: the single-server parser words its error.
func seedsOf(raw string) ([]string, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, false
	}
	q := u.Query()
	if !strings.Contains(u.Host, ",") && !q.Has("addr") {
		return nil, false
	}
	seeds := strings.Split(u.Host, ",")
	return append(seeds, q["addr"]...), true
}

// IsClusterURL reports whether raw names a Redis Cluster by several seed
// addresses (?addr=… or host:port,host:port). A URL of one node of a cluster
// is known only by asking the node: see RefuseCluster.
func IsClusterURL(raw string) bool {
	_, ok := seedsOf(raw)
	return ok
}

// parseClusterURL reads a cluster URL of either seed form into go-redis's
// cluster options. The comma form is rewritten into the ?addr= form, which
// is the one go-redis reads.
func parseClusterURL(raw string) (*redis.ClusterOptions, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	seeds := strings.Split(u.Host, ",")
	for _, s := range seeds {
		if h, p, err := net.SplitHostPort(s); err != nil || h == "" || p == "" {
			return nil, fmt.Errorf("seed address %q is not host:port", s)
		}
	}
	// Redis Cluster has one database, 0 (SELECT is refused): a URL naming
	// another would be silently ignored by go-redis.
	if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
		return nil, fmt.Errorf("database %s: a Redis Cluster has database 0 only", db)
	}
	q := u.Query()
	if q.Has("db") {
		if db := q.Get("db"); db != "0" {
			return nil, fmt.Errorf("database %s: a Redis Cluster has database 0 only", db)
		}
		q.Del("db")
	}
	// The seeds in the order given: the URL's own first, then the ?addr= ones.
	u.Host, u.Path = seeds[0], ""
	given := q["addr"]
	q["addr"] = append(seeds[1:len(seeds):len(seeds)], given...)
	u.RawQuery = q.Encode()
	return redis.ParseClusterURL(u.String())
}

// clusterFromNode is the cluster options of a plain URL whose server turned
// out to be a cluster node: the node is the seed, with the URL's credentials
// and TLS.
func clusterFromNode(opt *redis.Options) (*redis.ClusterOptions, error) {
	if opt.DB != 0 {
		return nil, fmt.Errorf("database %d: a Redis Cluster has database 0 only", opt.DB)
	}
	return &redis.ClusterOptions{
		Addrs:    []string{opt.Addr},
		Username: opt.Username, Password: opt.Password, TLSConfig: opt.TLSConfig,
		Protocol: opt.Protocol, ClientName: opt.ClientName,
		DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout,
		PoolFIFO: opt.PoolFIFO, PoolTimeout: opt.PoolTimeout,
		ConnMaxIdleTime: opt.ConnMaxIdleTime, ConnMaxLifetime: opt.ConnMaxLifetime,
	}, nil
}

// nodeOptions is one node's client options under the cluster's settings:
// the per-node client racetest's sessions use, as a plain URL would give it.
func nodeOptions(co *redis.ClusterOptions, addr string) *redis.Options {
	return &redis.Options{
		Addr:     addr,
		Username: co.Username, Password: co.Password, TLSConfig: co.TLSConfig,
		Protocol: co.Protocol, ClientName: co.ClientName,
		DialTimeout: co.DialTimeout, ReadTimeout: co.ReadTimeout, WriteTimeout: co.WriteTimeout,
		PoolFIFO: co.PoolFIFO, PoolTimeout: co.PoolTimeout,
		ConnMaxIdleTime: co.ConnMaxIdleTime, ConnMaxLifetime: co.ConnMaxLifetime,
	}
}

// clusterEnabled asks a server whether it is a Redis Cluster node. A server
// that refuses INFO, or has no cluster section (an older Redis, a fork), is
// taken for a single server, as before clusters were understood.
func clusterEnabled(ctx context.Context, cl redis.Cmdable) bool {
	info, err := cl.Info(ctx, "cluster").Result()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(info, "\n") {
		if strings.TrimSpace(line) == "cluster_enabled:1" {
			return true
		}
	}
	return false
}

// ClusterRefusal is the error a user of --redis-url that runs on one server
// only gives for a Redis Cluster: what refuses it, and what to do.
func ClusterRefusal(what string) error {
	return scenarios.BadParam(fmt.Errorf("redis: %s does not run on a Redis Cluster yet; point --redis-url at a single server (the five built-in scenarios do run on one)", what))
}

// RefuseCluster returns ClusterRefusal(what) when raw names a Redis Cluster
// by its seeds, or when cl (a client of raw's server; nil to check the URL
// only) is a cluster node. It is for the users of --redis-url that are not
// ported to clusters: a plain client there would meet MOVED errors for most
// keys, and a run would report them as the pattern's failures.
func RefuseCluster(ctx context.Context, raw string, cl redis.Cmdable, what string) error {
	if IsClusterURL(raw) {
		return ClusterRefusal(what)
	}
	if cl != nil {
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		if clusterEnabled(cctx, cl) {
			return ClusterRefusal(what)
		}
	}
	return nil
}

// clusterInfo is what a run learnt of the cluster it runs on.
type clusterInfo struct {
	primaries []string // every primary's address, sorted
	slot      int      // the hash slot of every key of the run
	node      string   // the primary that serves it
}

// describe names the cluster for Server(): its primaries.
func (ci *clusterInfo) describe() string {
	return fmt.Sprintf("Redis Cluster of %d primaries (%s)", len(ci.primaries), formatAddrs(ci.primaries))
}

// primaries lists the cluster's primaries (those that serve slots): the
// servers cleanup and clean visit.
func primaries(ctx context.Context, cc *redis.ClusterClient) ([]string, error) {
	var mu sync.Mutex
	var out []string
	err := cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, n.Options().Addr)
		return nil
	})
	sort.Strings(out)
	return out, err
}

// hashTag is the part of a key Redis Cluster hashes: the run id in braces.
func hashTag(runID string) string { return "{" + runID + "}" }

// slotOf is the hash slot of every key with hashTag(runID), as the cluster
// itself computes it (CLUSTER KEYSLOT), so that racetest never relies on its
// own copy of the hash.
func slotOf(ctx context.Context, cc *redis.ClusterClient, runID string) (int, error) {
	n, err := cc.ClusterKeySlot(ctx, hashTag(runID)).Result()
	return int(n), err
}

// formatAddrs joins addresses for a message.
func formatAddrs(addrs []string) string {
	if len(addrs) == 0 {
		return "no primary"
	}
	return strings.Join(addrs, ", ")
}
