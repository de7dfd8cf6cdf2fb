package redeem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Mongo is the service over MongoDB: coupons in one collection
// ({_id: code, used}), payments in another ({code, at}).
type Mongo struct {
	DB *mongo.Database
	// The collections' names.
	CouponsName, RedemptionsName string
}

// MongoWithPrefix names the collections prefix_coupons and
// prefix_redemptions.
func MongoWithPrefix(db *mongo.Database, prefix string) *Mongo {
	return &Mongo{DB: db, CouponsName: prefix + "_coupons", RedemptionsName: prefix + "_redemptions"}
}

// NewCoupon adds an unused coupon.
func (m *Mongo) NewCoupon(ctx context.Context, code string) error {
	if _, err := m.DB.Collection(m.CouponsName).InsertOne(ctx, bson.D{{Key: "_id", Value: code}, {Key: "used", Value: false}}); err != nil {
		return fmt.Errorf("new coupon %s: %w", code, err)
	}
	return nil
}

// Redemptions counts the payments of code.
func (m *Mongo) Redemptions(ctx context.Context, code string) (int, error) {
	n, err := m.DB.Collection(m.RedemptionsName).CountDocuments(ctx, bson.D{{Key: "code", Value: code}})
	if err != nil {
		return 0, fmt.Errorf("count redemptions of %s: %w", code, err)
	}
	return int(n), nil
}

// RedeemNaive reads the coupon and, if it is unused, marks it and pays.
func (m *Mongo) RedeemNaive(ctx context.Context, code string, step Step) error {
	step.mark("check")
	var c struct {
		Used bool `bson:"used"`
	}
	err := m.DB.Collection(m.CouponsName).FindOne(ctx, bson.D{{Key: "_id", Value: code}}).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return ErrNoCoupon
	}
	if err != nil {
		return fmt.Errorf("read coupon %s: %w", code, err)
	}
	if c.Used {
		return ErrAlreadyRedeemed
	}
	step.mark("act")
	if _, err := m.DB.Collection(m.CouponsName).UpdateOne(ctx, bson.D{{Key: "_id", Value: code}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "used", Value: true}}}}); err != nil {
		return fmt.Errorf("mark coupon %s used: %w", code, err)
	}
	return m.pay(ctx, code, nil)
}

// RedeemFixed pays with the coupon's code as the payment's _id: the unique
// index on _id lets one insert through and refuses the rest with a
// duplicate-key error, the only error that means "already redeemed". (A
// conditional updateOne on {used: false} is the other fix on MongoDB, but
// FerretDB, CI's stand-in, does not apply it atomically.)
func (m *Mongo) RedeemFixed(ctx context.Context, code string, step Step) error {
	step.mark("act")
	err := m.pay(ctx, code, code)
	if mongo.IsDuplicateKeyError(err) {
		return ErrAlreadyRedeemed
	}
	return err
}

func (m *Mongo) pay(ctx context.Context, code string, id any) error {
	doc := bson.D{{Key: "code", Value: code}, {Key: "at", Value: time.Now()}}
	if id != nil {
		doc = append(bson.D{{Key: "_id", Value: id}}, doc...)
	}
	if _, err := m.DB.Collection(m.RedemptionsName).InsertOne(ctx, doc); err != nil {
		return fmt.Errorf("pay coupon %s: %w", code, err)
	}
	return nil
}
