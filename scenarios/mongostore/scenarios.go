package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// Collection suffixes, after the run's prefix racetest_<runid>_.
const (
	collEffects = "effects"         // one document per time the guarded action ran
	collSettled = "effects_settled" // the effects of bursts already counted
	collCoupons = "coupons"
	collSaves   = "saves"
	collActive  = "sanctions"
	collLeases  = "leases"
	collGrants  = "grants"
)

func kinds() []kind {
	return []kind{
		{name: scenarios.MemorySet, prepare: prepareEffects, attempt: memorySet, effects: countEffects},
		{name: scenarios.CheckThenWrite, prepare: prepareEffects, attempt: checkThenWrite, effects: countEffects},
		{name: scenarios.ConditionalUpdate, prepare: prepareCoupons, reset: issueCoupon, attempt: redeemCoupon, effects: countRedemptions},
		{name: scenarios.UniqueInsert, prepare: prepareUnique, reset: resetUnique, attempt: uniqueInsert, effects: countUnique},
		{name: scenarios.TTLLease, prepare: prepareLease, reset: expiredLease, attempt: takeLease, effects: countHolders},
	}
}

var errAlready = errors.New("already done")

func sleep(ctx context.Context, d time.Duration) error { return scenarios.Sleep(ctx, d) }

// keyIndex is a plain (not unique) index on key: it keeps the check's read
// cheap without deciding anything.
var keyIndex = mongo.IndexModel{Keys: bson.D{{Key: "key", Value: 1}}}

func prepareEffects(ctx context.Context, t *target) error {
	if err := t.create(ctx, collEffects, keyIndex); err != nil {
		return err
	}
	return t.create(ctx, collSettled, keyIndex)
}

// countEffects counts the burst's effect documents and moves them to the
// settled collection. Moving them keeps the live collection as small as one
// burst: FerretDB 1.x (SQLite) pushes down only a filter on _id alone and
// scans every document for check-then-write's findOne({key}), which made
// bursts at N=16 take half a second after 90 bursts and N=64 time out.
// Settled documents are never read again during the run; --keep leaves them
// for inspection.
func countEffects(ctx context.Context, t *target, key string) (int, error) {
	filter := bson.D{{Key: "key", Value: key}}
	live := t.coll(t.db, collEffects)
	cur, err := live.Find(ctx, filter)
	if err != nil {
		return 0, fmt.Errorf("mongo: read effects of %s: %w", key, err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		return 0, fmt.Errorf("mongo: read effects of %s: %w", key, err)
	}
	if len(docs) == 0 {
		return 0, nil
	}
	if _, err := t.coll(t.db, collSettled).InsertMany(ctx, docs); err != nil {
		return 0, fmt.Errorf("mongo: settle effects of %s: %w", key, err)
	}
	if _, err := live.DeleteMany(ctx, filter); err != nil {
		return 0, fmt.Errorf("mongo: settle effects of %s: %w", key, err)
	}
	return len(docs), nil
}

// effect records that the guarded action ran once, for worker w.
func (s *session) effect(ctx context.Context, key string, w *runner.Worker) error {
	_, err := s.t.coll(s.db, collEffects).InsertOne(ctx, bson.D{
		{Key: "key", Value: key}, {Key: "worker", Value: w.ID}, {Key: "replica", Value: w.Replica},
	})
	if err != nil {
		return fmt.Errorf("mongo: insert effect: %w", err)
	}
	return nil
}

// memorySet: the processing set lives in the replica's memory, correctly
// locked; the guarded action then writes its effect to the database.
func memorySet(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	a := s.a
	if !a.memory.Claim(subj.Key) {
		return runner.Refused(errAlready)
	}
	if err := sleep(ctx, s.t.p.Gap); err != nil {
		return runner.Failed(err)
	}
	w.Step(ctx, "act")
	if err := s.effect(ctx, subj.Key, w); err != nil {
		return runner.Failed(err)
	}
	return runner.Done()
}

// checkThenWrite: findOne, and if nothing is there, insertOne — two round
// trips with nothing between them that the server could enforce.
func checkThenWrite(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	err := s.t.coll(s.db, collEffects).FindOne(ctx, bson.D{{Key: "key", Value: subj.Key}}).Err()
	switch {
	case err == nil:
		return runner.Refused(errAlready)
	case !errors.Is(err, mongo.ErrNoDocuments):
		return runner.Failed(fmt.Errorf("mongo: findOne: %w", err))
	}
	if err := sleep(ctx, s.t.p.Gap); err != nil {
		return runner.Failed(err)
	}
	w.Step(ctx, "act")
	if err := s.effect(ctx, subj.Key, w); err != nil {
		return runner.Failed(err)
	}
	return runner.Done()
}

func prepareCoupons(ctx context.Context, t *target) error {
	if err := t.create(ctx, collCoupons); err != nil {
		return err
	}
	return prepareEffects(ctx, t)
}

// issueCoupon puts the burst's coupon in place, issued: setup, not an attempt.
func issueCoupon(ctx context.Context, t *target, key string) error {
	_, err := t.coll(t.db, collCoupons).InsertOne(ctx, bson.D{
		{Key: "_id", Value: key}, {Key: "status", Value: "issued"}, {Key: "redemptions", Value: 0},
	})
	if err != nil {
		return fmt.Errorf("mongo: issue coupon %s: %w", key, err)
	}
	return nil
}

// redeemCoupon: one findOneAndUpdate with the status in the filter. The
// attempt that gets the document back believes it won and pays: it records
// the payment as an effect document. Those documents, not the $inc counter,
// are the ground truth, because a server that loses concurrent $inc updates
// (FerretDB 1.x) would under-count exactly the double redemptions the
// scenario exists to find.
func redeemCoupon(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	err := s.t.coll(s.db, collCoupons).FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: subj.Key}, {Key: "status", Value: "issued"}},
		bson.D{
			{Key: "$set", Value: bson.D{{Key: "status", Value: "redeemed"}, {Key: "redeemedBy", Value: w.ID}}},
			{Key: "$inc", Value: bson.D{{Key: "redemptions", Value: 1}}},
		}).Err()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return runner.Refused(errors.New("no coupon in status issued"))
	case err != nil:
		return runner.Failed(fmt.Errorf("mongo: findOneAndUpdate: %w", err))
	}
	if err := s.effect(ctx, subj.Key, w); err != nil {
		return runner.Failed(err)
	}
	return runner.Done()
}

func countRedemptions(ctx context.Context, t *target, key string) (int, error) {
	n, err := countEffects(ctx, t, key)
	if err != nil {
		return 0, err
	}
	var coupon struct {
		Redemptions int64 `bson:"redemptions"`
	}
	if err := t.coll(t.db, collCoupons).FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Decode(&coupon); err != nil {
		return 0, fmt.Errorf("mongo: read coupon %s: %w", key, err)
	}
	t.redemptions.Add(coupon.Redemptions)
	t.effectsSeen.Add(int64(n))
	return n, nil
}

func prepareUnique(ctx context.Context, t *target) error {
	if t.p.Variant != VariantOneActive {
		return t.create(ctx, collSaves, mongo.IndexModel{
			Keys: bson.D{{Key: "key", Value: 1}}, Options: options.Index().SetUnique(true),
		})
	}
	err := t.create(ctx, collActive, mongo.IndexModel{
		Keys:    bson.D{{Key: "user", Value: 1}},
		Options: options.Index().SetUnique(true).SetPartialFilterExpression(bson.D{{Key: "active", Value: true}}),
	})
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == 238 { // NotImplemented
		return fmt.Errorf("mongo: %s refuses the partial unique index that unique-insert --variant %s needs "+
			"(partialFilterExpression {active: true}: code 238 NotImplemented) — run this variant against MongoDB: %w",
			t.server, VariantOneActive, err)
	}
	return err
}

// resetUnique gives the one-active variant's user an old, inactive
// sanction: the partial index must not count it.
func resetUnique(ctx context.Context, t *target, key string) error {
	if t.p.Variant != VariantOneActive {
		return nil
	}
	_, err := t.coll(t.db, collActive).InsertOne(ctx, bson.D{
		{Key: "user", Value: key}, {Key: "active", Value: false}, {Key: "worker", Value: -1},
	})
	if err != nil {
		return fmt.Errorf("mongo: insert inactive sanction for %s: %w", key, err)
	}
	return nil
}

// uniqueInsert: insertOne, and let the unique index refuse the rest. Only the
// duplicate-key error means "already done".
func uniqueInsert(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	coll, doc := s.t.coll(s.db, collSaves), bson.D{{Key: "key", Value: subj.Key}, {Key: "worker", Value: w.ID}}
	if s.t.p.Variant == VariantOneActive {
		coll = s.t.coll(s.db, collActive)
		doc = bson.D{{Key: "user", Value: subj.Key}, {Key: "active", Value: true}, {Key: "worker", Value: w.ID}}
	}
	_, err := coll.InsertOne(ctx, doc)
	return classifyInsert(err)
}

func countUnique(ctx context.Context, t *target, key string) (int, error) {
	if t.p.Variant == VariantOneActive {
		return t.count(ctx, collActive, bson.D{{Key: "user", Value: key}, {Key: "active", Value: true}})
	}
	return t.count(ctx, collSaves, bson.D{{Key: "key", Value: key}})
}
