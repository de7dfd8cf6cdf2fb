package redeem_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/racetest/racetest/examples/redeem"
	"github.com/racetest/racetest/race"
	"github.com/redis/go-redis/v9"
)

// The size of the tests: chosen so that, under -race on two shared cores
// with the databases on them, an ExpectRace that sees no race in 40 bursts
// and a Test with fewer than 20 tested bursts are both far rarer than 1 in
// 100 (the measured rates are in the README, "Test your own code"). The
// SAFE bound over 40 bursts is ≤7.2%.
const (
	attempts = 8
	bursts   = 40
)

// sqlService is one worker's handle: the service over a connection of its
// own, dialled before the first burst.
type sqlService struct {
	*redeem.SQL
	conn *sql.Conn
}

func (s *sqlService) Close() error { return s.conn.Close() }

// redeemer picks the naive or the fixed Redeem of a store.
type redeemer func(ctx context.Context, code string, step redeem.Step) error

// sqlCase fires Redeem (picked by which) at fresh coupons in db.
func sqlCase(t *testing.T, db *sql.DB, d redeem.Dialect, which func(*redeem.SQL) redeemer) race.Case {
	tables := createTables(t, db, d)
	admin := &redeem.SQL{DB: db, Dialect: d, Tables: tables}
	return race.Case{
		Attempts: attempts, Bursts: bursts,
		Subject: func(ctx context.Context, b race.Burst) (any, error) {
			return b.Token(), admin.NewCoupon(ctx, b.Token())
		},
		Session: func(ctx context.Context, worker int) (any, error) {
			conn, err := db.Conn(ctx)
			if err != nil {
				return nil, err
			}
			if err := conn.PingContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			return &sqlService{SQL: &redeem.SQL{DB: conn, Dialect: d, Tables: tables}, conn: conn}, nil
		},
		Attempt: func(ctx context.Context, code any, w *race.Worker) race.Outcome {
			svc := w.Session.(*sqlService).SQL
			return race.From(which(svc)(ctx, code.(string), w.Step), redeem.ErrAlreadyRedeemed)
		},
		Effects: func(ctx context.Context, code any) (int, error) {
			return admin.Redemptions(ctx, code.(string))
		},
	}
}

// createTables creates the service's tables under a prefix of the test's
// own, and drops them when the test ends — before the pool is closed: the
// one cleanup does both, in that order.
func createTables(t *testing.T, db *sql.DB, d redeem.Dialect) redeem.Tables {
	t.Helper()
	tables := redeem.TablesWithPrefix(prefix(t))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, q := range redeem.Drop(tables) {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Errorf("drop the test's tables (drop them by hand): %s: %v", q, err)
			}
		}
		db.Close()
	})
	for _, q := range redeem.Schema(d, tables) {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("create the test's tables: %s: %v", q, err)
		}
	}
	return tables
}

func naiveSQL(s *redeem.SQL) redeemer { return s.RedeemNaive }
func fixedSQL(s *redeem.SQL) redeemer { return s.RedeemFixed }

func TestRedeemMySQL(t *testing.T) {
	t.Run("naive", func(t *testing.T) {
		race.ExpectRace(t, sqlCase(t, openMySQL(t, attempts+2, nil), redeem.MySQL, naiveSQL))
	})
	t.Run("fixed", func(t *testing.T) {
		race.Test(t, sqlCase(t, openMySQL(t, attempts+2, nil), redeem.MySQL, fixedSQL))
	})
}

func TestRedeemPostgres(t *testing.T) {
	t.Run("naive", func(t *testing.T) {
		race.ExpectRace(t, sqlCase(t, openPostgres(t, attempts+2, nil), redeem.Postgres, naiveSQL))
	})
	t.Run("fixed", func(t *testing.T) {
		race.Test(t, sqlCase(t, openPostgres(t, attempts+2, nil), redeem.Postgres, fixedSQL))
	})
}

// redisCase fires Redeem (picked by which) at fresh coupon codes, each
// worker with a client (and a connection) of its own.
func redisCase(t *testing.T, opt *redis.Options, dial dialFunc, which func(*redeem.Redis) redeemer) race.Case {
	admin := redis.NewClient(opt)
	keys := prefix(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := admin.Scan(ctx, 0, keys+":*", 100).Iterator()
		for iter.Next(ctx) {
			if err := admin.Del(ctx, iter.Val()).Err(); err != nil {
				t.Errorf("delete the test's key %s (delete it by hand): %v", iter.Val(), err)
			}
		}
		if err := iter.Err(); err != nil {
			t.Errorf("list the test's keys %s:* (delete them by hand): %v", keys, err)
		}
		admin.Close()
	})
	svc := &redeem.Redis{Client: admin, Prefix: keys}
	return race.Case{
		Attempts: attempts, Bursts: bursts,
		Subject: func(_ context.Context, b race.Burst) (any, error) { return b.Token(), nil },
		Session: func(ctx context.Context, worker int) (any, error) {
			o := *opt
			o.PoolSize, o.MinIdleConns = 1, 0
			if dial != nil {
				o.Dialer = dial
			}
			c := redis.NewClient(&o)
			if err := c.Ping(ctx).Err(); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
		Attempt: func(ctx context.Context, code any, w *race.Worker) race.Outcome {
			mine := &redeem.Redis{Client: w.Session.(*redis.Client), Prefix: keys}
			return race.From(which(mine)(ctx, code.(string), w.Step), redeem.ErrAlreadyRedeemed)
		},
		Effects: func(ctx context.Context, code any) (int, error) { return svc.Redemptions(ctx, code.(string)) },
	}
}

func naiveRedis(s *redeem.Redis) redeemer { return s.RedeemNaive }
func fixedRedis(s *redeem.Redis) redeemer { return s.RedeemFixed }

// handlerWork is the handler's own work before it redeems, for the Redis
// cases released at the gate: a fixed redemption is one SET NX, a ~30 µs
// round trip, and under load the gate's spread (0.15–2 ms) left only 17 of
// 40 bursts with two attempts in flight, which proves nothing. The
// last-byte release (lastbyte_test.go) needs no such work.
const handlerWork = time.Millisecond

func withWork(which func(*redeem.Redis) redeemer) func(*redeem.Redis) redeemer {
	return func(s *redeem.Redis) redeemer {
		s.Work = handlerWork
		return which(s)
	}
}

func TestRedeemRedis(t *testing.T) {
	t.Run("naive", func(t *testing.T) {
		race.ExpectRace(t, redisCase(t, redisOptions(t), nil, withWork(naiveRedis)))
	})
	t.Run("fixed", func(t *testing.T) {
		race.Test(t, redisCase(t, redisOptions(t), nil, withWork(fixedRedis)))
	})
}
