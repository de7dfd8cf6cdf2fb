package mongostore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
)

// snapshotDB is a database of the test's own on the server of
// RACETEST_MONGO_URI, dropped at the end.
func snapshotDB(t *testing.T) *mongo.Database {
	t.Helper()
	uri := testenv.URL("mongo")
	cl, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(4 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Disconnect(context.Background()) })
	if err := cl.Ping(context.Background(), nil); err != nil {
		testenv.Unavailable(t, Name, err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	db := cl.Database("racetest_" + hex.EncodeToString(b))
	t.Cleanup(func() {
		if err := db.Drop(context.Background()); err != nil {
			t.Errorf("drop the database %s by hand: %v", db.Name(), err)
		}
	})
	return db
}

// What a snapshot sees of a collection, as docs/scripts.md says: its
// documents, and the sum of each top-level numeric field but _id. A nested
// field, a numeric string, an array's elements are not seen (a race on
// them alone goes unnoticed); an unwatched collection is not read.
func TestSnapshotSeesTopLevelNumbersOnly(t *testing.T) {
	db := snapshotDB(t)
	ctx := context.Background()
	if _, err := db.Collection("accounts").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 7}, {Key: "balance", Value: int32(10)}, {Key: "wallet", Value: bson.D{{Key: "coins", Value: 3}}},
			{Key: "note", Value: "12"}, {Key: "tags", Value: bson.A{1, 2}}},
		bson.D{{Key: "_id", Value: 8}, {Key: "balance", Value: 2.5}, {Key: "limit", Value: int64(1) << 40}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"other", "racetest_0badf00d_effects"} {
		if _, err := db.Collection(c).InsertOne(ctx, bson.D{{Key: "n", Value: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Snapshot(ctx, db, []string{"accounts"})
	if err != nil {
		t.Fatal(err)
	}
	want := runner.Snapshot{"accounts" + runner.RowsSuffix: big.NewRat(2, 1), "accounts.balance": big.NewRat(25, 2), "accounts.limit": new(big.Rat).SetInt64(1 << 40)}
	if len(s) != len(want) {
		t.Errorf("snapshot %v, want %v", s, want)
	}
	for k, v := range want {
		if s[k] == nil || s[k].Cmp(v) != 0 {
			t.Errorf("%s = %v, want %s", k, s[k], v.RatString())
		}
	}
	// No --watch: every collection of the database but a run's own, which
	// is read when named.
	if s, err = Snapshot(ctx, db, nil); err != nil || s["other"+runner.RowsSuffix] == nil || s["accounts"+runner.RowsSuffix] == nil || s["racetest_0badf00d_effects"+runner.RowsSuffix] != nil {
		t.Errorf("the whole database: %v, %v", s, err)
	}
	if s, err = Snapshot(ctx, db, []string{"racetest_0badf00d_effects"}); err != nil || s["racetest_0badf00d_effects"+runner.RowsSuffix] == nil {
		t.Errorf("a run's collection, named: %v, %v", s, err)
	}
}

// A snapshot reads at most MaxSnapshotDocuments documents: more is refused
// (a SnapshotError, exit 2) with the way out, --watch or an effects command.
func TestSnapshotRefusesTooManyDocuments(t *testing.T) {
	db := snapshotDB(t)
	ctx := context.Background()
	defer func(n int64) { maxSnapshotDocuments = n }(maxSnapshotDocuments)
	maxSnapshotDocuments = 5
	docs := make([]any, 6)
	for i := range docs {
		docs[i] = bson.D{{Key: "n", Value: i}}
	}
	if _, err := db.Collection("many").InsertMany(ctx, docs[:5]); err != nil {
		t.Fatal(err)
	}
	if _, err := Snapshot(ctx, db, nil); err != nil {
		t.Fatalf("5 documents, the limit: %v", err)
	}
	if _, err := db.Collection("more").InsertOne(ctx, docs[5]); err != nil {
		t.Fatal(err)
	}
	_, err := Snapshot(ctx, db, nil)
	var se *runner.SnapshotError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "more than 5 documents to read per burst in database "+db.Name()+" — name the collections the attempt writes with --watch COLL,…, or count the effects with --effects COMMAND") {
		t.Fatalf("6 documents over 2 collections: %v", err)
	}
	if _, err := Snapshot(ctx, db, []string{"more"}); err != nil {
		t.Errorf("--watch the one collection: %v", err)
	}
}
