package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/racetest/racetest/internal/testenv"
)

// mongoOfItsOwn connects to the MongoDB server of RACETEST_MONGO_URI and
// gives a database of the test's own (dropped at the end) and the URI that
// names it, for --mongo-uri.
func mongoOfItsOwn(t *testing.T) (*mongo.Database, string) {
	t.Helper()
	raw := testenv.URL("mongo")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("RACETEST_MONGO_URI: %v", err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "racetest_" + hex.EncodeToString(b)
	u.Path = "/" + name
	cl, err := mongo.Connect(options.Client().ApplyURI(u.String()).SetServerSelectionTimeout(4 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Disconnect(context.Background()) })
	if err := cl.Ping(context.Background(), nil); err != nil {
		testenv.Unavailable(t, "mongo", err)
	}
	db := cl.Database(name)
	t.Cleanup(func() {
		if err := db.Drop(context.Background()); err != nil {
			t.Errorf("drop the database %s by hand: %v", name, err)
		}
	})
	return db, u.String()
}

// mongoRedeemService is a small redeem service of the test's own on
// MongoDB: POST /redeem?code=C records a redemption of C — naive (look for
// one, then insert), fixed (the code as _id: the unique index lets one
// through), or erratic (fixed, but every third redemption also writes an
// audit document: an application that does not do the same thing twice).
func mongoRedeemService(db *mongo.Database, mode string) http.Handler {
	redemptions, audit := db.Collection("redemptions"), db.Collection("audit")
	var redeemed atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, code := r.Context(), r.URL.Query().Get("code")
		// Some work before the store, as a real handler has: a server that
		// answers at once looks like one that serves one request at a time.
		time.Sleep(2 * time.Millisecond)
		id := code
		if mode == "naive" {
			n, err := redemptions.CountDocuments(ctx, bson.D{{Key: "code", Value: code}})
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			if n > 0 {
				http.Error(w, "already redeemed", http.StatusConflict)
				return
			}
			time.Sleep(2 * time.Millisecond)
			b := make([]byte, 4)
			rand.Read(b)
			id = code + "-" + hex.EncodeToString(b)
		}
		_, err := redemptions.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "code", Value: code}, {Key: "amount", Value: 5}})
		if mongo.IsDuplicateKeyError(err) {
			http.Error(w, "already redeemed", http.StatusConflict)
			return
		}
		if err == nil && mode == "erratic" && redeemed.Add(1)%3 == 0 {
			_, err = audit.InsertOne(ctx, bson.D{{Key: "code", Value: code}})
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
}

// 'racetest http … --effects auto:mongo' against a redeem service of the
// test's own that writes to MongoDB: naive is a RACE named by its
// redemptions collection (and their amounts), the unique redeem SAFE, an
// erratic one INCONCLUSIVE. No --watch: the snapshot reads every collection
// of the URI's database, here the test's own.
func TestEffectsAutoHTTPMongoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bursts on a store's own server (the mutation step's runs of cmd skip it)")
	}
	db, uri := mongoOfItsOwn(t)
	t.Setenv("COLUMNS", "250")
	for _, c := range []struct {
		mode, expect string
		code         int
		want         []string
	}{
		{"naive", "race", exitOK, []string{"RACE", "`redemptions`: \\+1 row solo, \\+[2-6] together", `redemptions\.amount \(sum\) +\+5 +\+(10|15|20|25|30) +← differs`, "effects: auto:mongo on"}},
		{"fixed", "safe", exitOK, []string{"SAFE", `\b0 of \d+ tested bursts changed the database otherwise`, `redemptions \(rows\) +\+1 +\+1\n`, `redemptions\.amount \(sum\) +\+5 +\+5\n`}},
		{"erratic", "safe", exitInconclusive, []string{"INCONCLUSIVE", "the solo runs differ from each other \\(`audit`"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			srv := httptest.NewServer(mongoRedeemService(db, c.mode))
			defer srv.Close()
			out, stderr, code := execCmd(t, false, "http", "POST", srv.URL+"/redeem?code={{.Token}}", "--mongo-uri", uri,
				"--effects", "auto:mongo", "-n", "6", "--bursts", "12", "--expect", c.expect, "--strict")
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, c.code, out, stderr)
			}
			for _, w := range c.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("the report does not match %q:\n%s", w, out)
				}
			}
		})
	}
}

// A deposit service on MongoDB whose deposit is one $inc: atomic on
// MongoDB, SAFE there; FerretDB 1.x runs it as a read and a replace, so on
// FerretDB the service loses deposits, and the report must say that the
// LOST may be FerretDB's rather than the service's. Its false-alarm rate
// is measured beside TestEffectsAutoMongoIncOnFerretDB's.
func TestEffectsAutoHTTPMongoIncOnFerretDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bursts on a store's own server (the mutation step's runs of cmd skip it)")
	}
	db, uri := mongoOfItsOwn(t)
	var info struct {
		FerretDBVersion string `bson:"ferretdbVersion"`
	}
	if err := db.RunCommand(context.Background(), bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatal(err)
	}
	accounts := db.Collection("accounts")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, id := r.Context(), r.URL.Query().Get("code")
		var err error
		if r.URL.Path == "/open" {
			_, err = accounts.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "balance", Value: 0}})
		} else {
			time.Sleep(2 * time.Millisecond) // a handler's own work
			_, err = accounts.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: 10}}}})
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
		}
	}))
	defer srv.Close()
	t.Setenv("COLUMNS", "250")
	expect, want := "safe", []string{"SAFE", `accounts\.balance \(sum\) +\+60 +\+60\n`}
	if info.FerretDBVersion != "" {
		expect, want = "lost", []string{"LOST", "`accounts\\.balance` \\(sum\\): \\+60 solo, \\+[1-5]0 together",
			`mongo: the store is FerretDB, which runs findAndModify and updates \(conditional ones, \$inc\) as a read and a replace, not atomically: a RACE or LOST there may be FerretDB's`}
	}
	out, stderr, code := execCmd(t, false, "http", "POST", srv.URL+"/deposit?code={{.Token}}", "--setup", srv.URL+"/open?code={{.Token}}",
		"--mongo-uri", uri, "--effects", "auto:mongo", "--watch", "accounts", "-n", "6", "--bursts", "20", "--expect", expect, "--timeline=false")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("the report does not match %q:\n%s", w, out)
		}
	}
}
