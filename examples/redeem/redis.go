package redeem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the service over Redis: a coupon's state is the key
// <Prefix>:used:<code>, and each payment is pushed on <Prefix>:paid:<code>.
type Redis struct {
	Client redis.Cmdable
	Prefix string
	// Work is time spent between reading the coupon and writing (see SQL.Work).
	Work time.Duration
}

func (r *Redis) used(code string) string { return r.Prefix + ":used:" + code }
func (r *Redis) paid(code string) string { return r.Prefix + ":paid:" + code }

// Redemptions counts the payments of code.
func (r *Redis) Redemptions(ctx context.Context, code string) (int, error) {
	n, err := r.Client.LLen(ctx, r.paid(code)).Result()
	if err != nil {
		return 0, fmt.Errorf("count redemptions of %s: %w", code, err)
	}
	return int(n), nil
}

// RedeemNaive reads the coupon's key and, if it is not set, sets it and
// pays: two commands, with a gap between them.
func (r *Redis) RedeemNaive(ctx context.Context, code string, step Step) error {
	step.mark("check")
	err := r.Client.Get(ctx, r.used(code)).Err()
	if err == nil {
		return ErrAlreadyRedeemed
	}
	if !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read coupon %s: %w", code, err)
	}
	work(ctx, r.Work)
	step.mark("act")
	if err := r.Client.Set(ctx, r.used(code), 1, 0).Err(); err != nil {
		return fmt.Errorf("mark coupon %s used: %w", code, err)
	}
	return r.pay(ctx, code)
}

// RedeemFixed sets the key only if it is not set (SET NX) and pays only if
// it did: Redis decides, once.
func (r *Redis) RedeemFixed(ctx context.Context, code string, step Step) error {
	work(ctx, r.Work)
	step.mark("act")
	ok, err := r.Client.SetNX(ctx, r.used(code), 1, 0).Result()
	if err != nil {
		return fmt.Errorf("redeem %s: %w", code, err)
	}
	if !ok {
		return ErrAlreadyRedeemed
	}
	return r.pay(ctx, code)
}

func (r *Redis) pay(ctx context.Context, code string) error {
	if err := r.Client.RPush(ctx, r.paid(code), time.Now().UnixNano()).Err(); err != nil {
		return fmt.Errorf("pay coupon %s: %w", code, err)
	}
	return nil
}
