package mongostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// leaseClock says whose clock decides that a lease has expired.
type leaseClock struct {
	// server is true when the server evaluates $$NOW itself (an update
	// pipeline and $expr, MongoDB 4.2 and later).
	server bool
}

// epoch is the expiry of the lease a previous holder left behind: expired by
// any clock, however far the client's and the server's disagree.
var epoch = time.Unix(0, 0).UTC()

func prepareLease(ctx context.Context, t *target) error {
	if err := t.create(ctx, collLeases); err != nil {
		return err
	}
	if err := t.create(ctx, collGrants, mongo.IndexModel{Keys: bson.D{{Key: "lease", Value: 1}}}); err != nil {
		return err
	}
	// Ask the server whether it can read its own clock in an update: try it
	// on a lease of the run's own.
	probe := t.p.Prefix() + "clockprobe"
	if err := expiredLease(ctx, t, probe); err != nil {
		return err
	}
	_, _, err := acquire(ctx, t, t.db, leaseClock{server: true}, probe, "probe")
	var se mongo.ServerError
	switch {
	case err == nil:
		t.lease = leaseClock{server: true}
		t.note("mongo: ttl-lease compares lockUntil with the server's clock ($$NOW in an update pipeline and $expr)")
	case errors.As(err, &se) && se.HasErrorCode(238): // NotImplemented
		t.lease = leaseClock{server: false}
		t.note(fmt.Sprintf("mongo: %s refuses $$NOW in updates (%v), so ttl-lease compares lockUntil with racetest's clock%s",
			t.server, firstLine(err), clockSkew(ctx, t)))
	default:
		return fmt.Errorf("mongo: probing the server's clock for ttl-lease: %w", err)
	}
	_, err = t.coll(t.db, collLeases).DeleteOne(ctx, bson.D{{Key: "_id", Value: probe}})
	return err
}

// clockSkew measures how far the server's clock (hello.localTime, in
// milliseconds) is from racetest's, for the note that says whose clock
// decides expiry.
func clockSkew(ctx context.Context, t *target) string {
	var hello struct {
		LocalTime time.Time `bson:"localTime"`
	}
	before := time.Now()
	if err := t.db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil || hello.LocalTime.IsZero() {
		return ""
	}
	after := time.Now()
	mid := before.Add(after.Sub(before) / 2)
	return fmt.Sprintf(" (the server's clock differs by %s, ±%s)",
		hello.LocalTime.Sub(mid).Round(time.Millisecond), (after.Sub(before)/2 + time.Millisecond).Round(time.Millisecond))
}

func firstLine(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// expiredLease puts in place the lease a previous holder left to expire,
// so that the burst competes on taking over an existing lease document —
// the compare-and-set every later grant of a real lease is.
func expiredLease(ctx context.Context, t *target, key string) error {
	_, err := t.coll(t.db, collLeases).InsertOne(ctx, bson.D{
		{Key: "_id", Value: key}, {Key: "owner", Value: "previous holder"},
		{Key: "since", Value: epoch}, {Key: "lockUntil", Value: epoch}, {Key: "fence", Value: 0},
	})
	if err != nil {
		return fmt.Errorf("mongo: insert expired lease %s: %w", key, err)
	}
	return nil
}

type grant struct {
	Since     time.Time `bson:"since"`
	LockUntil time.Time `bson:"lockUntil"`
	Fence     int64     `bson:"fence"`
}

// acquire takes lease key for owner if it has expired, in one
// findOneAndUpdate. A lease held by someone else is not an error: ok is
// false.
//
// With the server's clock the filter needs $expr, which MongoDB refuses in
// an upsert (code 224), so the lease document must already exist (Reset puts
// it there); a held lease then matches nothing. With racetest's clock the
// statement is the common upsert form, and a held lease makes the upsert
// insert a second document with the same _id: E11000, also "not acquired".
func acquire(ctx context.Context, t *target, db *mongo.Database, clock leaseClock, key, owner string) (g grant, ok bool, err error) {
	ttl := max(t.p.TTL.Milliseconds(), 1)
	leases := t.coll(db, collLeases)
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	var res *mongo.SingleResult
	if clock.server {
		res = leases.FindOneAndUpdate(ctx,
			bson.D{{Key: "_id", Value: key}, {Key: "$expr", Value: bson.D{{Key: "$lt", Value: bson.A{"$lockUntil", "$$NOW"}}}}},
			mongo.Pipeline{{{Key: "$set", Value: bson.D{
				{Key: "owner", Value: bson.D{{Key: "$literal", Value: owner}}},
				{Key: "since", Value: "$$NOW"},
				{Key: "lockUntil", Value: bson.D{{Key: "$add", Value: bson.A{"$$NOW", ttl}}}},
				{Key: "fence", Value: bson.D{{Key: "$add", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$fence", 0}}}, 1}}}},
			}}}},
			after)
	} else {
		now := time.Now().UTC()
		res = leases.FindOneAndUpdate(ctx,
			bson.D{{Key: "_id", Value: key}, {Key: "lockUntil", Value: bson.D{{Key: "$lt", Value: now}}}},
			bson.D{
				{Key: "$set", Value: bson.D{
					{Key: "owner", Value: owner}, {Key: "since", Value: now},
					{Key: "lockUntil", Value: now.Add(time.Duration(ttl) * time.Millisecond)},
				}},
				{Key: "$inc", Value: bson.D{{Key: "fence", Value: 1}}},
			},
			after.SetUpsert(true))
	}
	err = res.Decode(&g)
	switch {
	case err == nil:
		return g, true, nil
	case errors.Is(err, mongo.ErrNoDocuments), mongo.IsDuplicateKeyError(err):
		return grant{}, false, nil
	default:
		return grant{}, false, fmt.Errorf("mongo: findOneAndUpdate lease: %w", err)
	}
}

// takeLease: take the burst's lease if it has expired; the holder then
// "dies" without releasing. Each grant is recorded with its validity, so
// that the store can say how many holders it granted at one instant.
func takeLease(ctx context.Context, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	owner := "w" + strconv.Itoa(w.ID) + "/r" + strconv.Itoa(w.Replica)
	g, ok, err := acquire(ctx, s.t, s.db, s.t.lease, subj.Key, owner)
	if err != nil {
		return runner.Failed(err)
	}
	if !ok {
		return runner.Refused(errors.New("lease held by another worker"))
	}
	if err := recordGrant(ctx, s.t, s.db, subj.Key, owner, g); err != nil {
		return runner.Failed(err)
	}
	return runner.Done()
}

func recordGrant(ctx context.Context, t *target, db *mongo.Database, key, owner string, g grant) error {
	_, err := t.coll(db, collGrants).InsertOne(ctx, bson.D{
		{Key: "lease", Value: key}, {Key: "owner", Value: owner},
		{Key: "from", Value: g.Since}, {Key: "until", Value: g.LockUntil}, {Key: "fence", Value: g.Fence},
	})
	if err != nil {
		return fmt.Errorf("mongo: record grant of %s: %w", key, err)
	}
	return nil
}

// countHolders is the most grants of the lease that were valid at one
// instant: more than one means two holders at once.
func countHolders(ctx context.Context, t *target, key string) (int, error) {
	cur, err := t.coll(t.db, collGrants).Find(ctx, bson.D{{Key: "lease", Value: key}})
	if err != nil {
		return 0, fmt.Errorf("mongo: read grants of %s: %w", key, err)
	}
	var gs []scenarios.Grant
	if err := cur.All(ctx, &gs); err != nil {
		return 0, fmt.Errorf("mongo: read grants of %s: %w", key, err)
	}
	return scenarios.MostHolders(gs), nil
}

// Checks verifies what counting effects cannot: a lease's liveness, and that
// "one active per user" lets a user have a new active document once the old
// one is deactivated.
func (t *target) Checks(ctx context.Context) []runner.Check {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout+t.p.TTL)
	defer cancel()
	switch {
	case t.kind.name == scenarios.TTLLease:
		return []runner.Check{t.leaseLiveness(ctx)}
	case t.kind.name == scenarios.UniqueInsert && t.p.Variant == VariantOneActive:
		return []runner.Check{t.reactivation(ctx)}
	}
	return nil
}

func (t *target) leaseLiveness(ctx context.Context) runner.Check {
	c := runner.Check{Name: "lease liveness"}
	key, ttl := t.p.Prefix()+"liveness", t.p.TTL
	if err := expiredLease(ctx, t, key); err != nil {
		c.Detail = err.Error()
		return c
	}
	start := time.Now()
	if _, ok, err := acquire(ctx, t, t.db, t.lease, key, "dies"); err != nil || !ok {
		c.Detail = fmt.Sprintf("first holder could not take an expired lease (granted=%v, err=%v)", ok, err)
		return c
	}
	_ = sleep(ctx, ttl/2)
	_, ok, err := acquire(ctx, t, t.db, t.lease, key, "early")
	if back := time.Since(start); err == nil && ok && back >= ttl {
		// The grant may have come after the dead holder's expiry, which is
		// no earlier than start+TTL: a loaded machine, not a wrong store.
		c.Inconclusive = true
		c.Detail = fmt.Sprintf("too slow to judge: the try meant for half the %s TTL came back after %s, when the lease may have expired (the machine is loaded; use a longer --ttl)",
			ttl, back.Round(time.Millisecond))
		return c
	}
	if err != nil || ok {
		c.Detail = fmt.Sprintf("at %s, before the %s TTL, the lease was granted=%v (err=%v): expected refused",
			time.Since(start).Round(time.Millisecond), ttl, ok, err)
		return c
	}
	return scenarios.AwaitExpiry(ctx, start, ttl/2, ttl, "", func() (bool, error) {
		_, ok, err := acquire(ctx, t, t.db, t.lease, key, "next")
		return ok, err
	})
}

// reactivation: a second active document for a user is refused, and allowed
// again once the first is deactivated.
func (t *target) reactivation(ctx context.Context) runner.Check {
	c := runner.Check{Name: "one active per user"}
	coll, user := t.coll(t.db, collActive), t.p.Prefix()+"reactivation"
	active := func() (any, error) {
		res, err := coll.InsertOne(ctx, bson.D{{Key: "user", Value: user}, {Key: "active", Value: true}})
		if err != nil {
			return nil, err
		}
		return res.InsertedID, nil
	}
	first, err := active()
	if err != nil {
		c.Detail = fmt.Sprintf("first active document refused: %v", err)
		return c
	}
	if _, err := active(); !mongo.IsDuplicateKeyError(err) {
		c.Detail = fmt.Sprintf("a second active document was not refused with a duplicate key (err=%v)", err)
		return c
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: first}}, bson.D{{Key: "$set", Value: bson.D{{Key: "active", Value: false}}}}); err != nil {
		c.Detail = fmt.Sprintf("deactivate: %v", err)
		return c
	}
	if _, err := active(); err != nil {
		c.Detail = fmt.Sprintf("after deactivation a new active document was refused: %v", err)
		return c
	}
	c.OK = true
	c.Detail = "a second active document was refused (E11000); after deactivating the first, a new one was allowed"
	return c
}
