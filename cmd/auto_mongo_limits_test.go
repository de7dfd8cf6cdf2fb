package cmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Without --watch a MongoDB snapshot reads every collection of the URI's
// database: another writer in any of them changes the store while no
// attempt runs, and the run is INCONCLUSIVE with that reason, never SAFE,
// even for a pattern that holds (the unique redeem).
func TestEffectsAutoMongoAnotherWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bursts on a store's own server (the mutation step's runs of cmd skip it)")
	}
	db, uri := mongoOfItsOwn(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		other := db.Collection("other")
		for ctx.Err() == nil {
			other.InsertOne(ctx, bson.D{{Key: "n", Value: 1}})
			time.Sleep(500 * time.Microsecond)
		}
	}()
	defer func() { stop(); <-done }()
	t.Setenv("COLUMNS", "250")
	dir := "@../examples/auto/"
	out, stderr, code := execCmd(t, false, "mongo", "--mongo-uri", uri, "--setup", dir+"schema.mongo", "--subject", dir+"subject.mongo",
		"--attempt", dir+"redeem-fixed.mongo", "--effects", "auto", "--teardown", dir+"drop.mongo", "-n", "4", "--bursts", "10", "--timeline=false", "--strict")
	want := "the database changed while no attempt ran (`other` +"
	if code != exitInconclusive || !strings.Contains(out, "INCONCLUSIVE") || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want %d and %q\n%s\n%s", code, exitInconclusive, want, out, stderr)
	}
}
