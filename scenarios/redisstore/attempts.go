package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

var (
	errAlready    = errors.New("already done")
	errNotIssued  = errors.New("coupon not in status issued (script returned 0)")
	errDuplicate  = errors.New("key already exists (SET NX replied nil)")
	errLeaseTaken = errors.New("lease held by another worker (SET NX PX replied nil)")
)

// redeemScript is UPDATE coupons SET status='redeemed' WHERE id=? AND
// status='issued' on Redis: the compare and the set run as one step (a script
// runs alone on the server), and only the attempt that changed the status
// records the effect, in the same step. It returns the "rows affected".
var redeemScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == 'issued' then
  redis.call('SET', KEYS[1], 'redeemed', 'PX', ARGV[2])
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
return 0
`)

// pushScript is the guarded action's RPUSH, with the key's TTL set in the
// same step: every key racetest writes expires by itself (runs.KeyTTL),
// even when the run is killed before its cleanup. One command, so a
// last-byte release holds it as it held the plain RPUSH.
var pushScript = redis.NewScript(`
redis.call('RPUSH', KEYS[1], ARGV[1])
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
`)

// keyTTL is runs.KeyTTL as the scripts take it.
var keyTTL = runs.KeyTTL.Milliseconds()

// push runs the guarded action: append owner to the effects list.
func (s *session) push(ctx context.Context, k keys) error {
	return pushScript.Run(ctx, s.cn, []string{k.effects}, s.owner, keyTTL).Err()
}

// leaseScript takes the lease with SET NX PX and, on a grant, records in the
// same step when the lease expires by the server's clock (PEXPIRETIME, Redis
// 7; TIME+PTTL before it) and for how long it was granted, so the effects
// can say how many holders were valid at one instant.
var leaseScript = redis.NewScript(`
if redis.replicate_commands then pcall(redis.replicate_commands) end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local ok, expires = pcall(redis.call, 'PEXPIRETIME', KEYS[1])
if not ok then
  local t = redis.call('TIME')
  expires = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + redis.call('PTTL', KEYS[1])
end
redis.call('RPUSH', KEYS[2], string.format('%d:%d:%s', expires, tonumber(ARGV[2]), ARGV[1]))
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`)

// memorySet: the check and the mark live in the replica's memory, correctly
// locked inside the replica; the guarded action then appends to the store.
func memorySet(ctx context.Context, s *session, k keys, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	a := s.app
	if !a.memory.Claim(k.subject) {
		return runner.Refused(errAlready)
	}
	if err := sleep(ctx, a.t.p.Gap); err != nil {
		return runner.Failed(err)
	}
	w.Step(ctx, "act")
	if err := s.push(ctx, k); err != nil {
		return s.fail(ctx, "RPUSH", err)
	}
	return runner.Done()
}

// checkThenWrite: EXISTS on the list of saves, then RPUSH if it was empty —
// SELECT, then INSERT on a table without a unique key: two round trips.
func checkThenWrite(ctx context.Context, s *session, k keys, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "check")
	n, err := s.cn.Exists(ctx, k.effects).Result()
	if err != nil {
		return s.fail(ctx, "EXISTS", err)
	}
	if n > 0 {
		return runner.Refused(errAlready)
	}
	if err := sleep(ctx, s.app.t.p.Gap); err != nil {
		return runner.Failed(err)
	}
	w.Step(ctx, "act")
	if err := s.push(ctx, k); err != nil {
		return s.fail(ctx, "RPUSH", err)
	}
	return runner.Done()
}

// conditionalUpdate: one compare-and-set script; its return value is the
// rows affected.
func conditionalUpdate(ctx context.Context, s *session, k keys, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	n, err := redeemScript.Run(ctx, s.cn, []string{k.subject, k.effects}, s.owner, keyTTL).Int()
	if err != nil {
		return s.fail(ctx, "EVALSHA redeem", err)
	}
	if n != 1 {
		return runner.Refused(errNotIssued)
	}
	return runner.Done()
}

// uniqueInsert: SET NX is the unique constraint. Its nil reply, and nothing
// else, means "already done"; the winner then runs the guarded action.
func uniqueInsert(ctx context.Context, s *session, k keys, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	if o, inserted := classifyInsert(ctx, s, s.cn.SetArgs(ctx, k.subject, s.owner, redis.SetArgs{Mode: "NX", TTL: runs.KeyTTL}).Err()); !inserted {
		return o
	}
	if err := s.push(ctx, k); err != nil {
		return s.fail(ctx, "RPUSH", err)
	}
	return runner.Done()
}

// ttlLease: take the lease if it is free or expired (the server expires it);
// the holder then dies without releasing it.
func ttlLease(ctx context.Context, s *session, k keys, w *runner.Worker) runner.Outcome {
	w.Step(ctx, "act")
	granted, err := acquire(ctx, s.cn, k, s.owner, s.app.t.ttlMS)
	if err != nil {
		return s.fail(ctx, "EVALSHA lease", err)
	}
	if !granted {
		return runner.Refused(errLeaseTaken)
	}
	return runner.Done()
}

func acquire(ctx context.Context, sc redis.Scripter, k keys, owner string, ttlMS int64) (bool, error) {
	n, err := leaseScript.Run(ctx, sc, []string{k.subject, k.effects}, owner, ttlMS, keyTTL).Int()
	return n == 1, err
}

func sleep(ctx context.Context, d time.Duration) error { return scenarios.Sleep(ctx, d) }
