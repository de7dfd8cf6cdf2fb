package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// Janitor connects to the server of c for 'racetest clean'.
func Janitor(ctx context.Context, c scenarios.Connections) (runs.Janitor, error) {
	cn, err := parseConn(scenarios.Params{Conn: c})
	if err != nil {
		return nil, err
	}
	cl, err := cn.connect(ctx, 1)
	if err != nil {
		return nil, err
	}
	where := "redis " + cn.addr
	if cc, ok := cl.(*redis.ClusterClient); ok {
		// clean visits every primary: name them, not only the seeds given.
		pctx, cancel := context.WithTimeout(ctx, connectTimeout)
		ps, err := primaries(pctx, cc)
		cancel()
		if err != nil {
			cl.Close()
			return nil, cn.connectError(err)
		}
		where = "redis cluster (primaries " + formatAddrs(ps) + ")"
	}
	return &janitor{cl: cl, where: where}, nil
}

// janitor is 'racetest clean' on one server, or on every primary of a
// Redis Cluster (package runs scans each).
type janitor struct {
	cl    redis.UniversalClient
	where string
}

func (j *janitor) Where() string { return j.where }

func (j *janitor) Leftovers(ctx context.Context) ([]runs.Leftover, error) {
	return runs.LeftoversRedis(ctx, j.cl)
}

func (j *janitor) Drop(ctx context.Context, runID string) (string, error) {
	n, err := runs.DropRedis(ctx, j.cl, runID)
	return fmt.Sprintf("%d keys under %s* and the marker %s", n, runs.Prefix(runID), runs.Marker(runID)), err
}

func (j *janitor) Close() error { return j.cl.Close() }
