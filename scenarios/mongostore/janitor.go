package mongostore

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// Janitor connects to the server of c for 'racetest clean'.
func Janitor(ctx context.Context, c scenarios.Connections) (runs.Janitor, error) {
	cn, err := newConn(scenarios.Params{Conn: c})
	if err != nil {
		return nil, err
	}
	client, err := cn.connect(ctx, cn.options(1))
	if err != nil {
		return nil, err
	}
	return &janitor{client: client, db: client.Database(cn.database), where: "mongo " + mongodb.Redact(cn.uri) + " database " + cn.database}, nil
}

type janitor struct {
	client *mongo.Client
	db     *mongo.Database
	where  string
}

func (j *janitor) Where() string { return j.where }

func (j *janitor) Leftovers(ctx context.Context) ([]runs.Leftover, error) {
	return runs.LeftoversMongo(ctx, j.db)
}

func (j *janitor) Drop(ctx context.Context, runID string) (string, error) {
	dropped, err := runs.DropMongo(ctx, j.db, runID)
	return strings.Join(dropped, ", "), err
}

func (j *janitor) Close() error { return disconnect(j.client) }
