// Package redisstore runs racetest's five built-in scenarios on Redis, or on
// a server that speaks its protocol (Valkey, ...), through go-redis v9.
//
// # Connecting
//
// --redis-url or RACETEST_REDIS_URL, default redis://127.0.0.1:6379/0 (any
// URL redis.ParseURL accepts: redis://user:password@host:port/db, rediss://
// for TLS). Each replica gets its own pool sized to its workers, and each
// worker a dedicated connection, dialled and pinged before the first burst.
// The client never retries a command (a write retried after a timeout may
// have been applied the first time and would be counted twice), and every
// call is bounded by the attempt's own deadline.
//
// # Keys
//
// Every key a run writes starts with racetest_<run id>_; each burst has its
// own, b<n>:subject and b<n>:effects. At the end the run deletes the keys
// with that prefix, found with SCAN MATCH (never KEYS), and nothing else.
//
// # What each scenario sends
//
// memory-set: the "processing" set is a map in the replica's memory, behind
// a mutex; the attempt that adds the key to it then runs the guarded action,
// RPUSH b<n>:effects. One replica: one effect. R replicas: up to R.
//
// check-then-write: EXISTS b<n>:effects (the check: "is there a save for this
// token?"), then, if it was 0, RPUSH b<n>:effects (the write) — SELECT then
// INSERT on a table without a unique key. Two round trips: every attempt whose
// EXISTS reaches the server before the first RPUSH gets through. With one
// pre-dialled connection per worker this races in most bursts without any
// --gap.
//
// conditional-update: Reset sets b<n>:subject to "issued" (the coupon). Each
// attempt runs one script:
//
//	if redis.call('GET', KEYS[1]) == 'issued' then
//	  redis.call('SET', KEYS[1], 'redeemed')
//	  redis.call('RPUSH', KEYS[2], ARGV[1])   -- the effect, in the same step
//	  return 1
//	end
//	return 0
//
// This is UPDATE coupons SET status='redeemed' WHERE id=? AND
// status='issued' with its rows affected: a compare-and-set on a value that
// exists before the burst, decided by the server (a script runs alone). SET
// NX on a separate "claimed" key would also give one winner, but it is an
// insert of a new key — that is unique-insert, not an update of the coupon's
// status — and the two would be the same test twice. 0 is "declined".
//
// unique-insert: SET b<n>:subject <worker> NX is the unique constraint; the
// attempt that inserted it then runs the guarded action, RPUSH b<n>:effects.
// Only SET's nil reply ("the key exists") counts as declined; any other error
// (OOM, READONLY on a replica, a dropped connection) is counted as an error.
//
// ttl-lease: one script takes the lease and records the grant in the same
// step:
//
//	SET b<n>:subject <worker> NX PX <ttl ms>
//	-- on a grant: RPUSH b<n>:effects "<expiry ms>:<ttl ms>:<worker>",
//	-- the expiry read back with PEXPIRETIME (the server's clock)
//
// Expiry is the server's: a holder that dies without releasing blocks others
// until Redis expires the key. The TTL is passed in whole milliseconds,
// rounded up (--ttl 1500us becomes PX 2), and the report says so. The effect
// count is the most grants valid at one instant, by the server's clock: a
// burst that outlives the TTL may grant the lease twice in turn, which is
// correct; two holders at once is the violation. A liveness check below the
// table takes a lease, lets its holder die, and shows that the lease is
// refused before the TTL and granted after it.
package redisstore
