package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// TestRefuseClusterAsksTheServer: a seed URL is refused without a server; a
// plain URL once its server says cluster_enabled:1; a single server, or one
// without a cluster section in INFO (older, or a fork), is not.
func TestRefuseClusterAsksTheServer(t *testing.T) {
	ctx := context.Background()
	if err := redisstore.RefuseCluster(ctx, "redis://h:1?addr=h:2", nil, "lost-update"); !isClusterRefusal(err, "lost-update") {
		t.Errorf("seed URL: %v", err)
	}
	if err := redisstore.RefuseCluster(ctx, "redis://h:1,h:2/0", nil, "lost-update"); !isClusterRefusal(err, "lost-update") {
		t.Errorf("comma seed URL: %v", err)
	}
	if err := redisstore.RefuseCluster(ctx, redisdb.DefaultURL, nil, "lost-update"); err != nil {
		t.Errorf("one server's URL, no client: %v", err)
	}
	for section, cluster := range map[string]string{
		"# Cluster\r\ncluster_enabled:1\r\n": "yes",
		"# Cluster\r\ncluster_enabled:0\r\n": "",
		"":                                   "",
	} {
		f := startFake(t, func(_ int, args []string) string {
			if strings.EqualFold(args[0], "INFO") {
				return bulk(section)
			}
			if r, ok := basics(args); ok {
				return r
			}
			return "+OK\r\n" // CLIENT SETINFO and the like
		})
		opt, _ := redis.ParseURL(f.URL())
		cl := redis.NewClient(opt)
		err := redisstore.RefuseCluster(ctx, f.URL(), cl, "a script")
		cl.Close()
		if (cluster != "") != isClusterRefusal(err, "a script") || (cluster == "" && err != nil) {
			t.Errorf("INFO cluster %q: %v", section, err)
		}
	}
}

func isClusterRefusal(err error, what string) bool {
	var bad *scenarios.ParamError
	return errors.As(err, &bad) && strings.Contains(err.Error(), what+" does not run on a Redis Cluster yet; point --redis-url at a single server")
}
