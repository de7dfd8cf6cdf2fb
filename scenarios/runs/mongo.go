package runs

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

type mongoRecord struct {
	RunID     string `bson:"_id"`
	StartedMS int64  `bson:"started_ms"`
	Host      string `bson:"host"`
	PID       int    `bson:"pid"`
}

// RegisterMongo registers r in db's racetest_runs collection, before the
// run creates a collection, and refuses a run id in use.
func RegisterMongo(ctx context.Context, db *mongo.Database, r Record) error {
	_, err := db.Collection(Table).InsertOne(ctx, mongoRecord{RunID: r.RunID, StartedMS: r.Started.UnixMilli(), Host: r.Host, PID: r.PID})
	if mongo.IsDuplicateKeyError(err) {
		return &InUseError{Backend: "mongo", RunID: r.RunID}
	}
	if err != nil {
		return fmt.Errorf("mongo: cannot register run %s in %s.%s: %w", r.RunID, db.Name(), Table, err)
	}
	names, err := CollectionsMongo(ctx, db, r.RunID)
	if err == nil && len(names) > 0 {
		err = &InUseError{Backend: "mongo", RunID: r.RunID, Example: "collection " + db.Name() + "." + names[0]}
	}
	if err != nil {
		_ = UnregisterMongo(context.WithoutCancel(ctx), db, r.RunID)
		return err
	}
	return nil
}

// UnregisterMongo removes run id's registration.
func UnregisterMongo(ctx context.Context, db *mongo.Database, runID string) error {
	if _, err := db.Collection(Table).DeleteOne(ctx, bson.D{{Key: "_id", Value: runID}}); err != nil {
		return fmt.Errorf("mongo: cannot remove run %s from %s.%s: %w", runID, db.Name(), Table, err)
	}
	return nil
}

// CollectionsMongo lists the collections under run id's prefix.
func CollectionsMongo(ctx context.Context, db *mongo.Database, runID string) ([]string, error) {
	return db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: bson.D{{Key: "$regex", Value: "^" + regexp.QuoteMeta(Prefix(runID))}}}})
}

// LeftoversMongo lists the registered runs and every collection that
// follows racetest's naming scheme.
func LeftoversMongo(ctx context.Context, db *mongo.Database) ([]Leftover, error) {
	cur, err := db.Collection(Table).Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("mongo: cannot read %s.%s: %w", db.Name(), Table, err)
	}
	var recs []mongoRecord
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("mongo: cannot read %s.%s: %w", db.Name(), Table, err)
	}
	var records []Record
	for _, m := range recs {
		records = append(records, Record{RunID: m.RunID, Started: time.UnixMilli(m.StartedMS).UTC(), Host: m.Host, PID: m.PID})
	}
	names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: bson.D{{Key: "$regex", Value: "^racetest_"}}}})
	if err != nil {
		return nil, fmt.Errorf("mongo: cannot list the collections of %s: %w", db.Name(), err)
	}
	return Group(records, names), nil
}

// DropMongo drops a registered run's collections, then its registration.
func DropMongo(ctx context.Context, db *mongo.Database, runID string) ([]string, error) {
	names, err := CollectionsMongo(ctx, db, runID)
	if err != nil {
		return nil, fmt.Errorf("mongo: cannot list the collections of run %s: %w", runID, err)
	}
	var dropped []string
	for _, n := range names {
		if err := db.Collection(n).Drop(ctx); err != nil {
			return dropped, fmt.Errorf("mongo: cannot drop %s.%s: %w", db.Name(), n, err)
		}
		dropped = append(dropped, n)
	}
	return dropped, UnregisterMongo(ctx, db, runID)
}
