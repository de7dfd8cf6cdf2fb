package redeem_test

import (
	"context"
	"testing"
	"time"

	"github.com/racetest/racetest/examples/redeem"
	"github.com/racetest/racetest/race"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

const (
	mongoEnv     = "RACETEST_MONGO_URI"
	defaultMongo = "mongodb://127.0.0.1:27017/?directConnection=true"
	mongoDB      = "test"
	// mongoTimeout bounds server selection, which waits the whole bound
	// when no server answers: a skip costs this much.
	mongoTimeout = 5 * time.Second
)

// mongoClient connects with o (the URI applied), pinging within seconds.
func mongoClient(ctx context.Context, o *options.ClientOptions) (*mongo.Client, error) {
	c, err := mongo.Connect(o.SetServerSelectionTimeout(mongoTimeout).SetConnectTimeout(connectTimeout))
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*connectTimeout)
	defer cancel()
	if err := c.Ping(pctx, readpref.Primary()); err != nil {
		_ = c.Disconnect(context.Background())
		return nil, err
	}
	return c, nil
}

// mongoSession is one worker's client, disconnected after the last burst.
type mongoSession struct {
	*redeem.Mongo
	client *mongo.Client
}

func (s *mongoSession) Close() error { return s.client.Disconnect(context.Background()) }

// mongoCase fires Redeem (picked by which) at fresh coupons; each worker
// has a client of its own, of one connection, dialled through dial.
func mongoCase(t *testing.T, dial options.ContextDialer, which func(*redeem.Mongo) redeemer) race.Case {
	uri := env(mongoEnv, defaultMongo)
	if _, err := connstring.ParseAndValidate(uri); err != nil {
		t.Fatalf("%s: %v (want a URI such as %s)", mongoEnv, err, defaultMongo)
	}
	admin, err := mongoClient(t.Context(), options.Client().ApplyURI(uri))
	if err != nil {
		unavailable(t, "MongoDB (or FerretDB)", mongoEnv, err)
	}
	keys := prefix(t)
	svc := redeem.MongoWithPrefix(admin.Database(mongoDB), keys)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range []string{svc.CouponsName, svc.RedemptionsName} {
			if err := svc.DB.Collection(c).Drop(ctx); err != nil {
				t.Errorf("drop the test's collection %s (drop it by hand): %v", c, err)
			}
		}
		_ = admin.Disconnect(ctx)
	})
	return race.Case{
		Attempts: attempts, Bursts: bursts,
		Subject: func(ctx context.Context, b race.Burst) (any, error) {
			return b.Token(), svc.NewCoupon(ctx, b.Token())
		},
		Session: func(ctx context.Context, worker int) (any, error) {
			o := options.Client().ApplyURI(uri).SetMaxPoolSize(1).SetMinPoolSize(1).
				// Polled, not streamed, so the client's monitor holds one
				// connection and only ever sends hello, which the wire
				// release never takes for the worker's.
				SetServerMonitoringMode(options.ServerMonitoringModePoll)
			if dial != nil {
				o.SetDialer(dial)
			}
			c, err := mongoClient(ctx, o)
			if err != nil {
				return nil, err
			}
			return &mongoSession{Mongo: redeem.MongoWithPrefix(c.Database(mongoDB), keys), client: c}, nil
		},
		Attempt: func(ctx context.Context, code any, w *race.Worker) race.Outcome {
			return race.From(which(w.Session.(*mongoSession).Mongo)(ctx, code.(string), w.Step), redeem.ErrAlreadyRedeemed)
		},
		Effects: func(ctx context.Context, code any) (int, error) { return svc.Redemptions(ctx, code.(string)) },
	}
}

func naiveMongo(m *redeem.Mongo) redeemer { return m.RedeemNaive }
func fixedMongo(m *redeem.Mongo) redeemer { return m.RedeemFixed }

func TestRedeemMongo(t *testing.T) {
	t.Run("naive", func(t *testing.T) { race.ExpectRace(t, mongoCase(t, nil, naiveMongo)) })
	t.Run("fixed", func(t *testing.T) { race.Test(t, mongoCase(t, nil, fixedMongo)) })
}

func TestLastByteMongo(t *testing.T) {
	t.Run("naive", func(t *testing.T) {
		rel := newRelease(t, "mongo")
		released(t, race.ExpectRace(t, withRelease(mongoCase(t, rel, naiveMongo), rel)))
	})
	t.Run("fixed", func(t *testing.T) {
		rel := newRelease(t, "mongo")
		released(t, race.Test(t, withRelease(mongoCase(t, rel, fixedMongo), rel)))
	})
}
