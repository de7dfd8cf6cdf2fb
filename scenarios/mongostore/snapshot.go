package mongostore

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/racetest/racetest/runner"
)

// MaxSnapshotDocuments is the most documents a --effects auto snapshot
// reads: it sums each collection's numeric fields in the client, exactly
// (FerretDB's aggregation cannot be relied on for it).
const MaxSnapshotDocuments = 200_000

var maxSnapshotDocuments int64 = MaxSnapshotDocuments

// Snapshot measures the collections of db for --effects auto: per
// collection its documents ("COLL rows") and the sum of each top-level
// numeric field but _id ("COLL.FIELD"). watch names the collections; none,
// every collection of the database but system ones and racetest's own.
func Snapshot(ctx context.Context, db *mongo.Database, watch []string) (runner.Snapshot, error) {
	colls := watch
	if len(colls) == 0 {
		names, err := db.ListCollectionNames(ctx, bson.D{})
		if err != nil {
			return nil, fmt.Errorf("mongo: listing the collections of %s: %w", db.Name(), err)
		}
		for _, n := range names {
			// racetest's runs' own collections (racetest_…) come and go
			// on a shared database: read only when --watch names them.
			if !strings.HasPrefix(n, "system.") && !strings.HasPrefix(n, "racetest_") {
				colls = append(colls, n)
			}
		}
		sort.Strings(colls)
	}
	s := runner.Snapshot{}
	var read int64
	for _, name := range colls {
		cur, err := db.Collection(name).Find(ctx, bson.D{})
		if err != nil {
			return nil, fmt.Errorf("mongo: snapshot of %s: %w", name, err)
		}
		rows := int64(0)
		sums := map[string]*big.Rat{}
		for cur.Next(ctx) {
			rows++
			if read++; read > maxSnapshotDocuments {
				cur.Close(ctx)
				return nil, &runner.SnapshotError{Msg: fmt.Sprintf("--effects auto: more than %d documents to read per burst in database %s — name the collections the attempt writes with --watch COLL,…, or count the effects with --effects COMMAND", maxSnapshotDocuments, db.Name())}
			}
			var doc bson.D
			if err := cur.Decode(&doc); err != nil {
				cur.Close(ctx)
				return nil, fmt.Errorf("mongo: snapshot of %s: %w", name, err)
			}
			for _, e := range doc {
				if e.Key == "_id" {
					continue
				}
				if r := numeric(e.Value); r != nil {
					if sums[e.Key] == nil {
						sums[e.Key] = new(big.Rat)
					}
					sums[e.Key].Add(sums[e.Key], r)
				}
			}
		}
		err = cur.Err()
		cur.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("mongo: snapshot of %s: %w", name, err)
		}
		s[name+runner.RowsSuffix] = new(big.Rat).SetInt64(rows)
		for f, v := range sums {
			s[name+"."+f] = v
		}
	}
	return s, nil
}

// numeric is a BSON number as an exact rational; nil for anything else.
func numeric(v any) *big.Rat {
	switch x := v.(type) {
	case int32:
		return new(big.Rat).SetInt64(int64(x))
	case int64:
		return new(big.Rat).SetInt64(x)
	case float64:
		return new(big.Rat).SetFloat64(x)
	case bson.Decimal128:
		if r, ok := new(big.Rat).SetString(x.String()); ok {
			return r
		}
	}
	return nil
}
