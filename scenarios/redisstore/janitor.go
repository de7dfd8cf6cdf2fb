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
	return &janitor{cl: cl, where: "redis " + cn.addr}, nil
}

type janitor struct {
	cl    *redis.Client
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
